"""How far a generated suite can be trusted: people's verdicts on its cases, summarised.

A careful reader judges each sampled case on three questions (docs/validity.md):

* **label-valid**: most careful readers agree with the expected label, label set or
  closer/farther ordering;
* **fluent**: grammatical, natural English (tokenisation artefacts such as a split "n't"
  are fine);
* **on-capability**: the case tests what its capability or description says.

Verdicts are data: an *annotation batch* is a JSON Lines file of judged cases (one row per
case: ``case_id``, ``generator``, ``capability``, the texts, the expectation, the three
verdicts 1/0 and a note) beside a ``.meta.json`` naming what was judged (the run, its
config and code version, the sampling, the part: ``dev`` for cases read while changing a
generator, ``final`` for cases drawn after the last change they measure). This module
reads batches and summarises them per generator and capability with 95 % Wilson
intervals; ``bench/bench_suite_validity.py`` prints the table and the reports show it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkray.engine.errors import InputError

VERDICTS = ("label_valid", "fluent", "on_capability")
PARTS = ("dev", "final")
# The generators a suite's cases come from, as the annotation batches name them.
GENERATORS = (
    "mft",
    "testaug",
    "s2lct_seed",
    "s2lct_expansion",
    "costello_cr1",
    "costello_cr2",
    "costello_cr3",
    "costello_cr4",
    "templates",
    # Pair cases (paraphrase, NLI) are another population than single texts: people's
    # verdicts on sentiment sentences say nothing of question pairs.
    "templates_pair",
    "testaug_pair",
    "costello_released_cr1",
    "costello_released_cr2",
    "costello_released_cr3",
)


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion (sound at 0 %, 100 % and small n)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class Share:
    """``k`` of ``n`` cases, with its interval."""

    k: int
    n: int

    @property
    def rate(self) -> float | None:
        return self.k / self.n if self.n else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.k, self.n)

    def text(self) -> str:
        """``97.0 % [92.6, 98.8]`` (percent with the 95 % interval)."""
        if not self.n:
            return "–"
        low, high = self.interval
        return f"{100 * self.k / self.n:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"


@dataclass
class Judged:
    """One judged case of an annotation batch."""

    case_id: str
    generator: str
    capability: str
    verdicts: dict[str, int]
    row: dict[str, Any] = field(default_factory=dict)  # the whole row as written

    @property
    def all_three(self) -> int:
        return int(all(self.verdicts[v] for v in VERDICTS))


@dataclass
class Batch:
    """An annotation batch: its metadata and its judged cases."""

    path: Path
    meta: dict[str, Any]
    cases: list[Judged]

    @property
    def part(self) -> str:
        return str(self.meta.get("part", "dev"))


def meta_path(batch: Path) -> Path:
    return batch.with_name(batch.name.removesuffix(".jsonl") + ".meta.json")


def jsonl_records(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, record) of every non-blank line of a JSON Lines file. Lines end at
    "\\n" only: ``str.splitlines`` also breaks at U+0085 and U+2028, which corpus text holds
    (Rotten Tomatoes writes an ellipsis as U+0085) and ``json.dumps(ensure_ascii=False)``
    leaves raw inside a string."""
    text = Path(path).read_text(encoding="utf-8")
    return [(n, json.loads(line)) for n, line in enumerate(text.split("\n"), start=1) if line.strip()]


def read_batch(path: str | Path, *, require_verdicts: bool = True) -> Batch:
    """A batch file and its ``.meta.json``; a row without its three verdicts is a one-line
    error naming the file and row (unless ``require_verdicts`` is false: a batch being read)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: annotation batch not found")
    mpath = meta_path(path)
    meta = json.loads(mpath.read_text(encoding="utf-8")) if mpath.is_file() else {}
    if meta.get("part", "dev") not in PARTS:
        raise InputError(f"{mpath}: part must be one of {', '.join(PARTS)}, not {meta.get('part')!r}")
    cases = []
    for number, row in jsonl_records(path):
        verdicts = {v: row.get(v) for v in VERDICTS}
        missing = [v for v, value in verdicts.items() if value not in (0, 1)]
        if missing:
            if require_verdicts:
                raise InputError(f"{path}: row {number}: no verdict for {', '.join(missing)} (1 or 0)")
            continue
        generator = str(row.get("generator") or "")
        if generator not in GENERATORS:
            raise InputError(f"{path}: row {number}: unknown generator {generator!r} (have: {', '.join(GENERATORS)})")
        cases.append(Judged(str(row["case_id"]), generator, str(row.get("capability") or ""), verdicts, row))
    return Batch(path, meta, cases)


def read_batches(paths: Iterable[str | Path], part: str | None = None) -> list[Batch]:
    """Every batch in ``paths`` (files, or folders of ``*.jsonl``), of ``part`` if given."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.jsonl")) if p.is_dir() else [p]
    batches = [read_batch(f) for f in files]
    return [b for b in batches if part is None or b.part == part]


@dataclass
class ValidityRow:
    """The verdict shares of one group of cases (a generator, or a generator x capability)."""

    generator: str
    capability: str  # "" for the generator as a whole
    shares: dict[str, Share]

    @property
    def n(self) -> int:
        return self.shares["all_three"].n

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"generator": self.generator, "capability": self.capability, "n": self.n}
        for name, share in self.shares.items():
            low, high = share.interval
            out[name] = share.rate
            out[f"{name}_low"], out[f"{name}_high"] = (low, high) if share.n else (None, None)
        return out


def _shares(cases: Sequence[Judged]) -> dict[str, Share]:
    shares = {v: Share(sum(c.verdicts[v] for c in cases), len(cases)) for v in VERDICTS}
    shares["all_three"] = Share(sum(c.all_three for c in cases), len(cases))
    return shares


def summarize(cases: Iterable[Judged], *, by_capability: bool = True) -> list[ValidityRow]:
    """One row per generator (``capability`` ""), then, if asked, one per capability of it."""
    groups: dict[str, list[Judged]] = {}
    for case in cases:
        groups.setdefault(case.generator, []).append(case)
    rows = []
    for generator in sorted(groups, key=lambda g: GENERATORS.index(g)):
        mine = groups[generator]
        rows.append(ValidityRow(generator, "", _shares(mine)))
        if by_capability:
            caps: dict[str, list[Judged]] = {}
            for case in mine:
                caps.setdefault(case.capability, []).append(case)
            rows += [ValidityRow(generator, cap, _shares(caps[cap])) for cap in sorted(caps)]
    return rows


def latest_per_case(batches: Sequence[Batch]) -> list[Judged]:
    """Each case once: a case judged in several batches counts with its last verdict."""
    seen: dict[tuple[str, str], Judged] = {}
    for batch in batches:
        for case in batch.cases:
            seen[(case.generator, case.case_id)] = case
    return list(seen.values())


def meets(row: ValidityRow, targets: Mapping[str, float]) -> bool:
    """Whether each share of ``row`` reaches its target (``{"label_valid": 0.95, ...}``)."""
    return all((row.shares[name].rate or 0.0) >= bar for name, bar in targets.items())


TARGETS = {"label_valid": 0.95, "fluent": 0.90, "on_capability": 0.90}


# --- which generator wrote a published case ---------------------------------------------


def generator_of(job: str, row: Mapping[str, Any]) -> str | None:
    """The generator (as annotation batches name it) of one row of a job's published suite:
    ``templates``, ``mft``, ``testaug``, ``s2lct_seed``/``s2lct_expansion`` (S²LCT rows
    whose meta says ``kind: expansion``) or ``costello_cr1``..``cr4`` (by capability);
    ``templates_pair``/``testaug_pair`` for a row with a second text."""
    if job in ("templates", "testaug"):
        return f"{job}_pair" if row.get("text_pair") else job
    if job == "mft":
        return job
    if job == "s2lct":
        raw = row.get("meta")
        meta = json.loads(raw) if isinstance(raw, str) and raw else {}
        return "s2lct_expansion" if meta.get("kind") == "expansion" else "s2lct_seed"
    if job == "costello":
        if _given_triple(row):
            return None  # a triple scored as given (the authors' released file, --triples), not generated
        name = f"costello_{str(row.get('capability') or '').lower()}"
        return name if name in GENERATORS else None
    method = row.get("method")  # a merged suite (checkray run): each row by its own method
    source = _JOB_OF_METHOD.get(method) if isinstance(method, str) else None
    return generator_of(source, row) if source and source != job else None


def _given_triple(row: Mapping[str, Any]) -> bool:
    """A COSTELLO row of a triple the run scored as given (``costello.triples`` or
    ``--triples``: the provenance's generator is ``given``) rather than generated."""
    provenance = row.get("provenance")
    return isinstance(provenance, Mapping) and provenance.get("generator") == "given"


# The test-case schema's ``method`` value -> the job that generates such cases.
_JOB_OF_METHOD = {"template": "templates", "mft": "mft", "testaug": "testaug", "s2lct": "s2lct", "costello": "costello"}


# --- estimates shipped with the package ---------------------------------------------------

ESTIMATES_FILE = Path(__file__).resolve().parent / "data" / "validity_estimates.json"
MIN_CAPABILITY_CASES = 10  # fewer judged cases of a capability: its generator's figure stands
# Fewer judged cases of a generator in a code version's batches: that version does not
# replace an earlier one's estimate (5 cases give a 95 % interval 60 points wide).
MIN_ESTIMATE_CASES = 20


def current_batches(batches: Sequence[Batch]) -> dict[str, list[Batch]]:
    """Per generator, the batches that describe it today: the ``final`` part when there is
    one, else ``dev``; of those, only the code version drawn last (older versions judged a
    generator that has since changed) among the versions with at least
    ``MIN_ESTIMATE_CASES`` judged cases of it (the newest version when none has). A batch
    whose meta says ``"for_estimates": false`` (a run with a setting off by default, such
    as ``costello.seed_grammar``) describes that setting, not what a user runs, and is
    left out."""
    out: dict[str, list[Batch]] = {}
    for generator in GENERATORS:
        mine = [
            b for b in batches if b.meta.get("for_estimates", True) and any(c.generator == generator for c in b.cases)
        ]
        if not mine:
            continue
        part = "final" if any(b.part == "final" for b in mine) else "dev"
        mine = [b for b in mine if b.part == part]
        by_version: dict[Any, list[Batch]] = {}
        for b in mine:
            by_version.setdefault(b.meta.get("code_version"), []).append(b)

        def judged(group: list[Batch], generator: str = generator) -> int:
            return sum(c.generator == generator for b in group for c in b.cases)

        def drawn(group: list[Batch]) -> str:
            return max(str(b.meta.get("drawn", "")) for b in group)

        enough = [g for g in by_version.values() if judged(g) >= MIN_ESTIMATE_CASES] or list(by_version.values())
        out[generator] = max(enough, key=drawn)
    return out


def build_estimates(batches: Sequence[Batch]) -> dict[str, Any]:
    """The estimates the reports show: per generator, its verdict shares over the current
    batches (``current_batches``) and per capability with enough judged cases."""
    estimates: dict[str, Any] = {}
    for generator, mine in current_batches(batches).items():
        cases = [c for c in latest_per_case(mine) if c.generator == generator]
        rows = summarize(cases, by_capability=True)
        overall = rows[0].as_dict()
        estimates[generator] = {
            "judged_on": {
                "code_version": mine[0].meta.get("code_version"),
                "part": mine[0].part,
                "runs": sorted({str(b.meta.get("run", b.path.name)) for b in mine}),
                "batches": sorted(b.path.name for b in mine),
            },
            "overall": overall,
            "capabilities": {r.capability: r.as_dict() for r in rows[1:] if r.n >= MIN_CAPABILITY_CASES},
        }
    return estimates


def load_estimates(path: str | Path | None = None) -> dict[str, Any]:
    """The shipped estimates (``engine/data/validity_estimates.json``); {} when none."""
    file = Path(path) if path else ESTIMATES_FILE
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}


ESTIMATE_COLUMNS = ("label_valid", "fluent", "on_capability", "all_three")


def estimate_rows(
    counts: Mapping[tuple[str, str], int],
    rejected: Mapping[tuple[str, str], int],
    estimates: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """One row per (generator, capability) of a suite: its cases, the candidates the
    automatic checks rejected, and the people's verdict shares that estimate its validity
    (the capability's own when enough of it was judged, else its generator's: ``basis``)."""
    rows = []
    for generator, capability in sorted(set(counts) | set(rejected)):
        known = estimates.get(generator) or {}
        own = (known.get("capabilities") or {}).get(capability)
        shares = own or known.get("overall") or {}
        judged = known.get("judged_on") or {}
        row: dict[str, Any] = {
            "generator": generator,
            "capability": capability,
            "cases": int(counts.get((generator, capability), 0)),
            "rejected": int(rejected.get((generator, capability), 0)),
            "judged": int(shares.get("n") or 0),
            "basis": ("capability" if own else "generator") if shares else "not judged",
            "judged_on": f"{judged.get('code_version')} ({judged.get('part')})" if judged else "",
        }
        for name in ESTIMATE_COLUMNS:
            row[name] = shares.get(name)
            row[f"{name}_low"] = shares.get(f"{name}_low")
            row[f"{name}_high"] = shares.get(f"{name}_high")
        rows.append(row)
    return rows
