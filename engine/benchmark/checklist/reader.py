"""Read CheckList suite files into plain records: which tests, their data, labels, expect.

Accepted inputs: a pickled ``TestSuite``, a single pickled test (``AbstractTest.save``),
or a ``.tar``/``.tar.gz`` archive (CheckList's ``release_suites/*.tar.gz``) holding one or
more ``.pkl`` files. Archives are read member by member in memory, never extracted, so
a member's path cannot write anywhere.
"""

from __future__ import annotations

import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from checkray.engine.benchmark.checklist.unpickle import Opaque, load_pickle
from checkray.engine.errors import InputError

TEST_TYPES = ("MFT", "INV", "DIR")
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


@dataclass
class TestRecord:
    """One CheckList test as data. ``kind`` is MFT/INV/DIR, or None when neither the
    class nor the suite's ``info`` says (a mapping must give the type)."""

    name: str
    kind: str | None
    capability: str
    description: str | None
    data: list[Any]
    labels: Any
    meta: Any
    agg_fn: Any
    expect: Any

    __test__ = False  # not a pytest test class


@dataclass
class SuiteRecord:
    name: str
    source: str  # the file, or "archive:member"
    tests: list[TestRecord]


def plain(value: Any) -> Any:
    """numpy containers and scalars as Python lists and scalars (object arrays keep items)."""
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def suite_stem(path: str) -> str:
    name = Path(path).name
    for suffix in (*_TAR_SUFFIXES, ".pkl", ".pickle", ".dill"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)] or name
    return Path(name).stem or name


def read_checklist(path: str, suite: str | None = None) -> list[SuiteRecord]:
    """Every suite in ``path`` (one for a pickle, one per ``.pkl`` member of an archive)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: CheckList suite file not found")
    if path.lower().endswith(_TAR_SUFFIXES) or tarfile.is_tarfile(p):
        return _read_archive(path, suite)
    with open(p, "rb") as stream:
        obj = load_pickle(stream, path)
    name = suite or suite_stem(path)
    return [SuiteRecord(name=name, source=path, tests=suite_tests(obj, name, path))]


def _read_archive(path: str, suite: str | None) -> list[SuiteRecord]:
    try:
        archive = tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InputError(f"{path}: not a readable tar archive: {exc}") from None
    suites: list[SuiteRecord] = []
    with archive:
        try:
            members = [m for m in archive.getmembers() if m.name.lower().endswith(".pkl")]
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise InputError(f"{path}: not a readable tar archive: {exc}") from None
        # macOS tar adds "._name.pkl" resource forks next to each file: not pickles.
        members = [m for m in members if not PurePosixPath(m.name).name.startswith("._")]
        if not members:
            raise InputError(f"{path}: the archive holds no .pkl file (a CheckList suite is a pickled TestSuite)")
        for member in members:
            parts = PurePosixPath(member.name).parts
            if member.name.startswith("/") or ".." in parts:
                raise InputError(f"{path}: refusing archive member '{member.name}': absolute or '..' path")
            if not member.isfile():
                raise InputError(f"{path}: refusing archive member '{member.name}': not a regular file (a link?)")
            source = f"{path}:{member.name}"
            stream = archive.extractfile(member)
            if stream is None:
                raise InputError(f"{source}: cannot read the archive member")
            with stream:
                obj = load_pickle(stream, source)
            stem = suite_stem(member.name)
            name = (suite if len(members) == 1 else f"{suite}_{stem}") if suite else stem
            if any(s.name == name for s in suites):
                raise InputError(f"{path}: two members are both suite '{name}'; pass them one at a time")
            suites.append(SuiteRecord(name=name, source=source, tests=suite_tests(obj, name, source)))
    return suites


def _kind(obj: Opaque) -> str | None:
    short = obj.name.rsplit(".", 1)[-1]
    return short if short in TEST_TYPES else None


def suite_tests(obj: Any, default_name: str, source: str) -> list[TestRecord]:
    """The tests of a pickled TestSuite, or the one test of a pickled AbstractTest."""
    if not isinstance(obj, Opaque):
        raise InputError(f"{source}: the pickle holds a {type(obj).__name__}, not a CheckList TestSuite or test")
    fields = obj.fields()
    tests = fields.get("tests")
    if isinstance(tests, Mapping):
        info = fields.get("info")
        info = info if isinstance(info, Mapping) else {}
        out = []
        for name, test in tests.items():
            if not isinstance(test, Opaque):
                raise InputError(f"{source}: test '{name}' is a {type(test).__name__}, not a CheckList test")
            test_info = info.get(name)
            out.append(_test_record(test, str(name), test_info if isinstance(test_info, Mapping) else {}, source))
        return out
    if "data" in fields:
        name = fields.get("name") if isinstance(fields.get("name"), str) else default_name
        return [_test_record(obj, name, {}, source)]
    raise InputError(f"{source}: the pickle holds a '{obj.name}', not a CheckList TestSuite or test")


def _text(value: Any) -> str | None:
    value = plain(value)
    return value if isinstance(value, str) and value else None


def _test_record(test: Opaque, name: str, info: Mapping[str, Any], source: str) -> TestRecord:
    fields = test.fields()
    data = plain(fields.get("data"))
    if not isinstance(data, list | tuple):
        raise InputError(f"{source}: test '{name}' has no list of test cases ('data')")
    kind = _kind(test)
    if kind is None and plain(info.get("type")) in TEST_TYPES:
        kind = plain(info.get("type"))
    return TestRecord(
        name=name,
        kind=kind,
        capability=_text(info.get("capability")) or _text(fields.get("capability")) or "unknown",
        description=_text(info.get("description")) or _text(fields.get("description")),
        data=list(data),
        labels=plain(fields.get("labels")),
        meta=plain(fields.get("meta")),
        agg_fn=fields.get("agg_fn"),
        expect=fields.get("expect"),
    )
