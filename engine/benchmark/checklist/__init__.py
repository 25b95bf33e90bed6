"""Import CheckList suites (marcotcr/checklist) as checkray test-case tables.

A CheckList suite is a dill pickle of ``checklist.test_suite.TestSuite``: its test
cases are plain data, but its expectation functions are pickled code. ``unpickle``
reads such a file without importing CheckList or dill and without running any pickled
callable; ``expect`` recognises CheckList's own expectation constructors from the
recorded calls; ``mapping`` lets the user say what the rest expect; ``convert`` writes
the rows. See ``docs/checklist.md``.
"""
