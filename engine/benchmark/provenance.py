"""What a benchmark run compared, by content: case and suite digests, model identities,
package versions (pure, apart from reading installed package metadata and model files).

* A case's **content digest** (``case_digests``) hashes every field that decides its verdict
  or where it is counted: ``text``, ``text_pair``, ``test_type``, ``expected_label``,
  ``expected_labels`` (as a set), ``perturbs``, ``relation``, ``tolerance``, ``testcase``,
  ``capability`` and ``topic`` (and ``versus_label``, ``original_labels`` when set). Not ``meta`` or ``provenance`` (generation notes that do not
  change what a model is asked or how it is judged). ``results.parquet`` carries it per row.
* A **suite digest** (``suite_digests``) hashes the sorted ``case_id``/content-digest pairs
  of every case of one suite name: two runs on the same suite have the same digest, and
  any added, removed, renamed or edited case changes it.
* A model's **identity** (``model_identity``): its registry entry, the content digest of
  every file, directory or module the entry names (``checkray.engine.stages.reference_digest``)
  and its revision when the entry pins one (``options.revision``).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

import pyarrow as pa

DIGEST_FIELDS = (
    "text",
    "text_pair",
    "test_type",
    "expected_label",
    "expected_labels",
    "perturbs",
    "relation",
    "tolerance",
    "testcase",
    "capability",
    "topic",
)
EXTRA_DIGEST_FIELDS = ("versus_label", "original_labels", "task")  # in the digest only when not null

# Packages whose versions change what a model predicts or how cases are judged.
PACKAGES = (
    "checkray",
    "torch",
    "transformers",
    "sentence-transformers",
    "tokenizers",
    "scikit-learn",
    "lightgbm",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "ray",
    "vaderSentiment",
    "textblob",
    "spacy",
    "xllamacpp",
    "llama_cpp_python",
    "vllm",
)


def _digest(text: str, size: int = 16) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:size]


def case_digests(cases: pa.Table) -> pa.Array:
    """The content digest of every case (see the module docstring); absent columns count as null."""
    n = cases.num_rows
    columns = {f: cases.column(f).to_pylist() if f in cases.column_names else [None] * n for f in DIGEST_FIELDS}
    extras = {f: cases.column(f).to_pylist() if f in cases.column_names else [None] * n for f in EXTRA_DIGEST_FIELDS}
    out = []
    for i in range(n):
        row = [columns[f][i] for f in DIGEST_FIELDS]
        labels = row[4]
        row[4] = sorted(labels) if labels is not None else None
        # Later expectation fields join the digest only when set, so older cases keep theirs.
        extra = {f: extras[f][i] for f in EXTRA_DIGEST_FIELDS if extras[f][i] is not None}
        if extra:
            row.append(extra)
        out.append(_digest(json.dumps(row, ensure_ascii=False, separators=(",", ":"))))
    return pa.array(out, pa.string())


def suite_digests(suites: Iterable[str], case_ids: Iterable[str], digests: Iterable[str]) -> dict[str, dict]:
    """Per suite name: its number of cases and the digest of its sorted (case_id, digest) pairs."""
    pairs: dict[str, list[str]] = {}
    for suite, cid, digest in zip(suites, case_ids, digests):
        pairs.setdefault(suite, []).append(f"{cid}\t{digest}")
    return {
        suite: {"cases": len(rows), "digest": _digest("\n".join(sorted(rows)), 20)} for suite, rows in pairs.items()
    }


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def environment() -> dict[str, Any]:
    """Python, platform and the versions of the packages that decide predictions."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
    }


def model_identity(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A registry entry (a ``ModelSpec`` as a dict) with what it names digested by content."""
    from checkray.engine.stages import reference_digest

    content = {k: v for k, v in spec.items() if k not in ("accuracy", "meta")}
    resolved = reference_digest(content)
    options = spec.get("options") or {}
    return {
        "name": spec.get("name"),
        "family": spec.get("family"),
        "path": spec.get("path"),
        "labels": list(spec.get("labels") or []),
        "revision": options.get("revision"),
        "entry": dict(spec),
        "content": resolved,
        "digest": _digest(json.dumps(resolved, sort_keys=True, default=str), 20),
    }
