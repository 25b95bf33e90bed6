"""``checkray validity train|score``: TestAug's validity classifier (§4.2).

    checkray validity train --annotations FILE --out DIR [--backend finetune|embedding_lr]
        -> DIR/metadata.json + DIR/model/ (finetune, the default) or DIR/head.joblib (embedding_lr)
    checkray validity train --reviews RUN [--generator G ...] --out DIR
        -> the same, trained on people's reviews of RUN's cases (``checkray review``), alone or
           added to --annotations: a validity filter for any generator
    checkray validity filter --model DIR --suite FILE --out FILE
        -> the suite without the cases the classifier finds invalid (any generator's suite)
    checkray validity score --model DIR --annotations FILE
        -> prints accuracy, F1 (valid) and the valid share on the annotated cases

``checkray testaug --validity DIR`` filters generated cases with a trained classifier.
On a cluster that reports a GPU the fine-tune runs in a one-GPU Ray task (``training_plan``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Optional

import typer

from checkray.engine.config import RuntimeConfig
from checkray.engine.runtime import ActorPlan, cluster_resources, init_ray, plan_actor_pool, wait_for
from checkray.engine.testaug.config import ValidityConfig
from checkray.engine.testaug.validity import VALIDITY_BACKENDS, read_annotations, repeated_annotations
from checkray.jobs.config import load_config
from checkray.jobs.console import console, step_progress

app = typer.Typer(help="Train and score TestAug's validity classifier.", no_args_is_help=True)


@app.command("train")
def train_command(
    annotations: Optional[Path] = typer.Option(
        None, "--annotations", "-a", help="JSONL, CSV, TSV or Parquet with 'text' and 'validity' (0/1, valid/invalid)."
    ),
    reviews: Optional[list[Path]] = typer.Option(
        None,
        "--reviews",
        help="A run people reviewed (`checkray review RUN`): its reviewed cases are training data (repeatable).",
    ),
    generators: Optional[list[str]] = typer.Option(
        None, "--generator", help="With --reviews: only this generator's cases (repeatable), e.g. s2lct_expansion."
    ),
    out: str = typer.Option(..., "--out", "-o", help="Directory for the classifier."),
    backend: Optional[str] = typer.Option(
        None,
        "--backend",
        help="finetune (default: the paper's fine-tuned encoder, minutes on CPU, the accurate one) "
        "or embedding_lr (seconds, less accurate): docs/testaug.md.",
    ),
    encoder: Optional[str] = typer.Option(
        None, "--encoder", help="Encoder: builtin:mpnet (finetune's default), builtin:minilm (embedding_lr's), a path."
    ),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with a 'validity' section."),
):
    """Train a validity classifier on annotated generated cases."""
    from checkray.actors.testaug.validity import score_validity, train_validity

    cfg = load_config(config, {"validity.backend": backend, "validity.encoder": encoder})
    v = cfg.section(ValidityConfig)
    rows, sources = training_data(annotations, reviews or [], generators or [])
    repeated = repeated_annotations(rows)
    if repeated.conflicting:  # kept as given: which annotator is right is not ours to decide
        console.print(
            f"note: {repeated.describe()}, kept as annotated (e.g. {repeated.conflicting[0]!r}); "
            "no classifier can be right on both"
        )
    plan = cluster_gpu_plan(v.backend, cfg.runtime)
    if plan is not None:
        clf = train_on_cluster(plan, rows, v, cfg.runtime.task_timeout_s)
    else:
        with step_progress("validity fine-tune") as on_step:  # minutes on CPU; embedding_lr reports nothing
            clf = train_validity(rows, v, on_step)
    clf.meta["annotations"] = str(annotations) if annotations else None
    clf.meta["trained_on"] = sources
    clf.meta["repeated_annotations"] = {
        "texts": repeated.texts,
        "rows": repeated.rows,
        "conflicting": len(repeated.conflicting),
    }
    clf.meta["train_scores"] = score_validity(clf, rows)
    clf.save(out)
    s = clf.meta["train_scores"]
    console.print(
        f"validity: {v.backend} on {len(rows)} cases ({clf.meta['n_valid']} valid) in "
        f"{clf.meta['train_seconds']}s; training accuracy {s['accuracy']:.3f}"
    )
    typer.echo(f"wrote {out.rstrip('/')}/metadata.json")


def training_data(
    annotations: Path | None, reviews: list[Path], generators: list[str]
) -> tuple[list[dict], list[dict]]:
    """The training rows (an annotation file's, then each reviewed run's) and what each
    source gave, for the classifier's metadata."""
    from checkray.engine.errors import InputError
    from checkray.engine.review import training_rows

    if annotations is None and not reviews:
        raise InputError("nothing to train on: pass --annotations FILE and/or --reviews RUN")
    if generators and not reviews:
        raise InputError("--generator picks reviewed cases: pass --reviews RUN too")
    rows, sources = [], []
    if annotations is not None:
        rows = read_annotations(annotations)
        sources.append({"annotations": str(annotations), "rows": len(rows)})
    for run in reviews:
        mine = training_rows(run, generators)
        valid = sum(r["validity"] for r in mine)
        console.print(f"validity: {len(mine)} reviewed cases of {run} ({valid} valid)")
        sources.append({"reviews": str(run), "generators": generators or "all", "rows": len(mine), "valid": valid})
        rows += mine
    return rows, sources


def training_plan(backend: str, resources: Mapping[str, float]) -> ActorPlan | None:
    """A one-GPU Ray task for a fine-tune when the cluster reports a GPU; None: train in
    this process (a quick backend, embedding_lr, takes seconds anywhere). Pure: tested with plain dicts."""
    if VALIDITY_BACKENDS.record(backend).quick or float(resources.get("GPU", 0)) <= 0:
        return None
    return plan_actor_pool(resources, "gpu", pool_size=1)


def cluster_gpu_plan(backend: str, runtime: RuntimeConfig) -> ActorPlan | None:
    """Only a command given a cluster (``RAY_ADDRESS``, e.g. under ``ray job submit``, or
    ``runtime.address``) asks Ray: on the head node the driver has no GPU, the cluster may.
    Without one the fine-tune runs here, on this machine's GPU if torch sees one, with a
    progress bar; no local Ray is started for it."""
    if VALIDITY_BACKENDS.record(backend).quick or not (os.environ.get("RAY_ADDRESS") or runtime.address):
        return None
    init_ray(runtime)
    return training_plan(backend, cluster_resources())


def train_on_cluster(plan: ActorPlan, rows: list[dict], config: ValidityConfig, timeout_s: float):
    import ray

    from checkray.actors.testaug.validity import train_validity_on_worker

    console.print(f"validity fine-tune: in a Ray task on a cluster GPU ({plan.num_gpus:g} GPU)")
    task = ray.remote(train_validity_on_worker).options(**plan.ray_options(), max_retries=0)
    return wait_for(task.remote(rows, config), timeout_s, "the validity fine-tune")  # input errors: one line by the CLI


@app.command("filter")
def filter_command(
    model: str = typer.Option(..., "--model", "-m", help="Directory written by `checkray validity train`."),
    suite: Path = typer.Option(..., "--suite", "-s", help="A suite Parquet file (any generator's)."),
    out: Path = typer.Option(..., "--out", "-o", help="The filtered suite (a new Parquet file)."),
    threshold: float = typer.Option(0.5, "--threshold", min=0.0, max=1.0, help="Keep cases with P(valid) >= this."),
):
    """Drop the cases a validity classifier finds invalid from any suite (TestAug's filter,
    for every generator: train it on reviews with `validity train --reviews RUN --generator G`)."""
    import pyarrow as pa

    from checkray.actors.testaug.validity import ValidityClassifier, annotation_inputs
    from checkray.engine.benchmark.inputs import read_suite
    from checkray.engine.errors import InputError
    from checkray.engine.review import case_description, without_orphans

    if out.exists() and out.resolve() == suite.resolve():
        raise InputError(f"{out}: --out would overwrite the suite it filters; name a new file")
    table = read_suite(str(suite))
    clf = ValidityClassifier.load(model)
    rows = table.to_pylist()
    judged = [r for r in rows if r.get("test_type") == "MFT" or not r.get("perturbs")]
    inputs = annotation_inputs(  # the description as a review unit shows it (engine/review.case_units)
        [{**r, "description": case_description(r)} for r in judged], with_description=clf.reads_description
    )
    p_valid = clf.predict_proba(inputs) if judged else []
    invalid = {r["case_id"] for r, p in zip(judged, p_valid) if p < threshold}
    kept, orphans = without_orphans(rows, [r for r in rows if r["case_id"] not in invalid])
    write_suite_file(pa.Table.from_pylist(kept, schema=table.schema), out)
    typer.echo(
        f"validity filter: kept {len(kept)} of {len(rows)} cases ({len(invalid)} judged invalid, "
        f"{orphans} perturbations of them dropped too); wrote {out}"
    )


def write_suite_file(table, out: Path) -> None:
    """Write a suite file atomically: a crash never leaves a half-written file under ``out``."""
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


@app.command("score")
def score_command(
    model: str = typer.Option(..., "--model", "-m", help="Directory written by `checkray validity train`."),
    annotations: Path = typer.Option(
        ..., "--annotations", "-a", help="JSONL, CSV, TSV or Parquet with 'text' and 'validity' (0/1, valid/invalid)."
    ),
):
    """Accuracy of a validity classifier on annotated cases."""
    from checkray.actors.testaug.validity import ValidityClassifier, score_validity

    clf = ValidityClassifier.load(model)
    scores = score_validity(clf, read_annotations(annotations))
    typer.echo(
        f"accuracy {scores['accuracy']:.4f} on {scores['n']} cases "
        f"(95 % interval {scores['accuracy_ci95'][0]:.3f}-{scores['accuracy_ci95'][1]:.3f}, F1 valid {scores['f1_valid']:.4f}, valid share {scores['valid_share']:.3f})"
    )
    typer.echo(json.dumps({"model": model, "backend": clf.backend, **scores}))
