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
refit TestAug's patching does (``jobs/testaug/patch.py``: the cases' text and expected
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
from collections.abc import Sequence
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
    failing = table.filter(pc.equal(table.column("pass"), False)).to_pylist()
    by_case: dict[tuple[str, str], dict] = {}
    for r in failing:
        entry = by_case.setdefault((r["suite"], r["case_id"]), {"digest": r["case_digest"], "models": [], "pred": []})
        entry["models"].append(r["model"])
        entry["pred"].append(r["predicted"])

    cases = _case_data(run, suite_files)
    digests = case_digests(cases).to_pylist()
    cases = conform(cases, TEST_CASE_SCHEMA, what="suite")
    rows = {(r["suite"], r["case_id"]): (r, d) for r, d in zip(cases.to_pylist(), digests)}
    missing = [k for k in by_case if k not in rows]
    if missing:
        raise InputError(f"case '{missing[0][1]}' of suite '{missing[0][0]}' is not in the case data: pass --suites")
    changed = [k for k, v in by_case.items() if rows[k][1] != v["digest"]]
    if changed:
        raise InputError(
            f"{len(changed)} failing case(s) differ from what the run tested (e.g. '{changed[0][1]}'): "
            "pass the suite files the run was made from"
        )
    originals = {k: r for k, (r, _) in rows.items()}
    pools = observed_pools(cases)
    if spec is not None:
        from checkray.engine.templates.expand import read_spec

        for t in read_spec(spec):
            pools[t.template_id] = {k: list(v) for k, v in t.values.items()}
    taken = {(r["text"], r["text_pair"]) for r, _ in rows.values()}
    out_rows: list[dict] = []
    emitted: set[tuple[str, str]] = set()

    def emit(row: dict, source: str, of: str | None, failed_by=None, predicted=None) -> None:
        key = (row["suite"], row["case_id"])
        if key in emitted:
            return
        emitted.add(key)
        out_rows.append(
            {
                "id": row["case_id"],
                **row,
                "label": training_label(row, originals),
                "source": source,
                "neighbour_of": of,
                "failed_by": failed_by,
                "predicted": predicted,
            }
        )

    for key in sorted(by_case):
        row = originals[key]
        emit(row, "failure", None, by_case[key]["models"], by_case[key]["pred"])
    for key in sorted(by_case):  # the originals INV/DIR failures are judged against
        row = originals[key]
        if row["perturbs"] is not None and (row["suite"], row["perturbs"]) in originals:
            emit(originals[(row["suite"], row["perturbs"])], "original", None)
    if neighbours_per_case > 0:
        for key in sorted(by_case):
            for n in neighbours(originals[key], pools, taken, neighbours_per_case, seed):
                emit(n, "neighbour", key[1])
    result = pa.Table.from_pylist(out_rows, schema=EXPORT_SCHEMA)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    if suffix in (".parquet", ".pq"):
        pq.write_table(result, tmp)
    else:
        with tmp.open("w", encoding="utf-8") as fh:
            for r in result.to_pylist():
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    tmp.replace(out)
    return result


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
