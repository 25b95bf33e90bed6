"""``--trust-code`` for a module or session fixture that loads code the tests wrote: the
``trusts_code`` marker switches it on per test, after such fixtures are built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from checkray.engine.trust import TRUST_ENV


@contextmanager
def trusting_code() -> Iterator[None]:
    before = os.environ.get(TRUST_ENV)
    os.environ[TRUST_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TRUST_ENV, None)
        else:
            os.environ[TRUST_ENV] = before
