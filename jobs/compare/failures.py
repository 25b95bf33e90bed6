"""``checkray export-failures RUN --out FILE``: a benchmark run's failing cases as data to
train on, and as a suite to rerun.

    checkray export-failures runs/bench --out failures.jsonl [--model NAME ...]
        [--neighbours N] [--spec TEMPLATE_SPEC] [--suites FILE ...] [--seed S]

One row per case that failed for at least one of the chosen models (``failed_by``,
``predicted`` list them), with every test-case column (``TEST_CASE_SCHEMA``, so the
Parquet file is a suite ``checkray benchmark`` runs again), the originals of failing
INV/DIR cases (``source: original``), and a training label ``label``:

* MFT: ``expected_label``, else the single element of ``expected_labels`` (a set of
  several acceptable labels, CheckList's "not negative", has no one label: null);
* INV: the label the original it perturbs is expected to have, else its own; null when
  neither has one (an INV case only says "same prediction");
* DIR: null (its ``expected_label`` names the label whose probability moves, not a gold label).

``id``/``text``/``label`` make the file a corpus for ``checkray zoo --corpus`` and for the
refit TestAug's patching does (``actors/testaug/patch.py``: the cases' text and expected
label, added to a model's training data); rows with a null label are not training data.
``--neighbours N`` adds up to N template neighbours per failing template case
(``checkray.engine.compare.neighbours``; ``source: neighbour``): slot values from ``--spec`` (the
template spec the suite was expanded from) or else those the suite's other cases used.
Cases that did not come from a template have no neighbours.

The case data (text pair, provenance, meta) comes from ``--suites`` or else from the
run's own cases checkpoint (``RUN/stages/cases``); its content digests must equal those
the run recorded per case.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import typer

from checkray.engine.benchmark.inputs import read_suite
from checkray.engine.benchmark.provenance import case_digests
from checkray.engine.compare.neighbours import neighbours, observed_pools
from checkray.engine.errors import InputError
from checkray.engine.schema import TEST_CASE_SCHEMA, conform
from checkray.engine.stages import RunDir
from checkray.jobs.base import published_path, read_manifest

EXPORT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        *TEST_CASE_SCHEMA,
        pa.field("label", pa.string()),  # the label to train on (null: none)
        pa.field("source", pa.string()),  # failure | original | neighbour
        pa.field("neighbour_of", pa.string()),
        pa.field("failed_by", pa.list_(pa.string())),
        pa.field("predicted", pa.list_(pa.string())),
    ]
)


def _case_data(run: RunDir, suite_files: Sequence[str] | None) -> pa.Table:
    if suite_files:
        return pa.concat_tables([read_suite(f) for f in suite_files])
    if run.exists("stages", "cases", "data.parquet"):
        return run.read_table("stages/cases/data.parquet")
    raise InputError(f"{run.uri}: no case data (stages/cases was deleted); pass --suites with the run's suite files")


def training_label(row: dict, originals: dict) -> str | None:
    """The label a failing case teaches (see the module docstring)."""
    if row["test_type"] == "MFT":
        if row["expected_label"] is not None:
            return row["expected_label"]
        labels = row.get("expected_labels") or []
        return labels[0] if len(labels) == 1 else None
    if row["test_type"] == "INV":
        original = originals.get((row["suite"], row["perturbs"]))
        if original is not None and original["expected_label"] is not None:
            return original["expected_label"]
        return row["expected_label"]
    return None


@dataclass
class FailingCase:
    """A case at least one chosen model failed: the content digest the run recorded for it,
    the models that failed it and what each predicted."""

    digest: str
    failed_by: list[str] = field(default_factory=list)
    predicted: list[str] = field(default_factory=list)


CaseKey = tuple[str, str]  # (suite, case_id)


def export_failures(
    run_dir: str,
    out: str | Path,
    models: Sequence[str] | None = None,
    neighbours_per_case: int = 0,
    suite_files: Sequence[str] | None = None,
    spec: str | Path | None = None,
    seed: int = 0,
) -> pa.Table:
    """Write the failing cases of a benchmark run to ``out`` (.jsonl or .parquet); return them."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".jsonl", ".ndjson", ".parquet", ".pq"):
        raise InputError(f"{out}: --out must end in .jsonl, .ndjson, .parquet or .pq")
    run = RunDir(run_dir)
    read_manifest(run, "benchmark")
    failing = failing_cases(run, models)
    raw = _case_data(run, suite_files)
    digests = case_digests(raw).to_pylist()
    cases = conform(raw, TEST_CASE_SCHEMA, what="suite")
    rows = cases.to_pylist()
    keys = [(r["suite"], r["case_id"]) for r in rows]
    check_case_data(failing, dict(zip(keys, digests)))
    by_key = dict(zip(keys, rows))
    pools = template_pools(cases, spec)
    taken = {(r["text"], r["text_pair"]) for r in by_key.values()}
    export = ExportRows(by_key)
    for key in sorted(failing):
        export.add(by_key[key], "failure", failed_by=failing[key].failed_by, predicted=failing[key].predicted)
    for key in sorted(failing):  # the originals INV/DIR failures are judged against
        row = by_key[key]
        if row["perturbs"] is not None and (row["suite"], row["perturbs"]) in by_key:
            export.add(by_key[(row["suite"], row["perturbs"])], "original")
    if neighbours_per_case > 0:
        for key in sorted(failing):
            for n in neighbours(by_key[key], pools, taken, neighbours_per_case, seed):
                export.add(n, "neighbour", neighbour_of=key[1])
    result = pa.Table.from_pylist(export.rows, schema=EXPORT_SCHEMA)
    write_export(result, out)
    return result


def failing_cases(run: RunDir, models: Sequence[str] | None) -> dict[CaseKey, FailingCase]:
    """The cases of the run's results that ``models`` (default: every model) failed."""
    table = pq.read_table(
        published_path(run, "benchmark", "results.parquet"),
        filesystem=run.fs,
        columns=["model", "suite", "case_id", "case_digest", "pass", "predicted"],
    )
    if "case_digest" not in table.column_names:
        raise InputError(f"{run.uri}: results without case digests (an older checkray); rerun the benchmark")
    names = sorted(set(table.column("model").to_pylist()))
    if models:
        unknown = sorted(set(models) - set(names))
        if unknown:
            raise InputError(f"{run.uri}: no model {', '.join(unknown)} (has: {', '.join(names)})")
        table = table.filter(pc.is_in(table.column("model"), pa.array(list(models))))
    failing: dict[CaseKey, FailingCase] = {}
    for r in table.filter(pc.equal(table.column("pass"), False)).to_pylist():
        case = failing.setdefault((r["suite"], r["case_id"]), FailingCase(r["case_digest"]))
        case.failed_by.append(r["model"])
        case.predicted.append(r["predicted"])
    return failing


def check_case_data(failing: Mapping[CaseKey, FailingCase], digests: Mapping[CaseKey, str]) -> None:
    """Every failing case is in the case data, with the content the run tested."""
    missing = [k for k in failing if k not in digests]
    if missing:
        raise InputError(f"case '{missing[0][1]}' of suite '{missing[0][0]}' is not in the case data: pass --suites")
    changed = [k for k, case in failing.items() if digests[k] != case.digest]
    if changed:
        raise InputError(
            f"{len(changed)} failing case(s) differ from what the run tested (e.g. '{changed[0][1]}'): "
            "pass the suite files the run was made from"
        )


def template_pools(cases: pa.Table, spec: str | Path | None) -> dict[str, dict[str, list]]:
    """Slot values per template: those of ``spec`` (the template spec) where it has the
    template, else those the suite's cases used."""
    pools = observed_pools(cases)
    if spec is not None:
        from checkray.engine.templates.expand import read_spec

        for t in read_spec(spec):
            pools[t.template_id] = {k: list(v) for k, v in t.values.items()}
    return pools


class ExportRows:
    """The export's rows (``EXPORT_SCHEMA``), each case once: as what it was added as first."""

    def __init__(self, by_key: Mapping[CaseKey, dict]):
        self.by_key = by_key  # every case of the suites: INV labels come from their originals
        self.rows: list[dict] = []
        self._added: set[CaseKey] = set()

    def add(
        self,
        row: dict,
        source: str,
        *,
        neighbour_of: str | None = None,
        failed_by: list[str] | None = None,
        predicted: list[str] | None = None,
    ) -> None:
        key = (row["suite"], row["case_id"])
        if key in self._added:
            return
        self._added.add(key)
        self.rows.append(
            {
                "id": row["case_id"],
                **row,
                "label": training_label(row, self.by_key),
                "source": source,
                "neighbour_of": neighbour_of,
                "failed_by": failed_by,
                "predicted": predicted,
            }
        )


def write_export(table: pa.Table, out: Path) -> None:
    """``table`` as Parquet or JSON Lines (by ``out``'s suffix), replacing ``out`` whole."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    if out.suffix.lower() in (".parquet", ".pq"):
        pq.write_table(table, tmp)
    else:
        with tmp.open("w", encoding="utf-8") as fh:
            for r in table.to_pylist():
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(out)


def export_failures_command(
    run: str = typer.Argument(..., help="A benchmark run directory."),
    out: Path = typer.Option(..., "--out", "-o", help="Output file: .jsonl/.ndjson (JSON Lines) or .parquet."),
    model: Optional[list[str]] = typer.Option(None, "--model", help="Only cases these models failed (repeatable)."),
    neighbours_per_case: int = typer.Option(
        0, "--neighbours", min=0, help="Template neighbours per failing template case (0: none)."
    ),
    suites: Optional[list[str]] = typer.Option(
        None, "--suites", "-s", help="The run's suite files (default: its checkpoint)."
    ),
    spec: Optional[Path] = typer.Option(
        None, "--spec", help="Template spec of the suite: neighbours from its full pools."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the neighbour sample."),
):
    """Write a benchmark run's failing cases with their expected labels (training data, or a suite)."""
    table = export_failures(run, out, model, neighbours_per_case, suites, spec, seed)
    source = table.column("source").to_pylist()
    labelled = table.column("label").null_count
    typer.echo(
        f"wrote {out}: {source.count('failure')} failing case(s), {source.count('original')} original(s) of failing "
        f"INV/DIR cases, {source.count('neighbour')} template neighbour(s); "
        f"{table.num_rows - labelled} row(s) with a training label"
    )
