"""``checkray repair``: close COSTELLO's test -> repair -> retest loop for one model.

    checkray repair --violations DIR --model NAME --out DIR2

reads a ``costello`` run (``DIR/triples.parquet``, ``DIR/violations.parquet``,
``DIR/costello.json``), fine-tunes embedder NAME on its violated triples with benign
triples as anchors (``actors/costello/repair.py``), saves the repaired model to ``DIR2/model``
(a sentence-transformers directory), re-runs the same tests on it (same triples,
dictionary and classifier training sentences; thresholds and classifiers recomputed for
the repaired model) and writes ``DIR2/violations.parquet``, ``DIR2/fixing.parquet``
(Table 3: fixing rate of violations, GT_A and GT_B per CR; downstream accuracy before
and after), ``DIR2/history.parquet`` and ``DIR2/report.html``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import typer
from pydantic import Field

from actors.costello.repair import RepairSettings
from jobs.config import CheckrayConfig, load_config
from engine.costello.triples import CAPABILITIES, triple_table
from engine.costello.metrics import fixing_rate
from engine.errors import InputError
from engine.report import Section, render, table_html
from engine.stages import RunDir, Stage, StageContext, StageRunner
from jobs.costello.config import RepairConfig
from jobs.console import stage_printer


def load_source(src: RunDir, model: str) -> tuple[dict, pa.Table, pa.Table, dict]:
    for name in ("costello.json", "triples.parquet", "violations.parquet"):
        if not src.exists(name):
            raise InputError(f"{src.uri}: not a costello run ({name} is missing)")
    meta = json.loads(src.read_text("costello.json"))
    specs = {e["name"]: e for e in meta["embedders"]}
    if model not in specs:
        raise InputError(f"repair: model '{model}' was not tested in {src.uri} (have: {', '.join(specs)})")
    if specs[model]["kind"] != "sentence-transformers":
        raise InputError(f"repair: model '{model}' is a {specs[model]['kind']} embedder; only sentence-transformers models can be fine-tuned")
    wide = triple_table(src.read_table("triples.parquet"))
    violations = src.read_table("violations.parquet")
    return specs[model], wide, violations.filter(pc.equal(violations["model"], model)), meta


def split_triples(wide: pa.Table, violations: pa.Table, distance: str, threshold: str):
    """(violated, benign) single-sentence triples under the default verdict."""
    v = violations.filter(pc.and_(pc.equal(violations["distance"], distance), pc.equal(violations["threshold"], threshold)))
    bad = {t for t, verdict in zip(v["triple"].to_pylist(), v["verdict"].to_pylist()) if verdict}
    violated, benign = [], []
    for r in wide.to_pylist():
        if r["seed_pair"] is not None:
            continue  # pair triples (CR4) are scored, not trained on
        (violated if r["triple"] in bad else benign).append((r["seed"], r["positive"], r["negative"]))
    return violated, benign


def counts(violations: pa.Table, distance: str, threshold: str) -> dict[str, dict[str, int]]:
    from jobs.costello.validate import violation_counts

    return violation_counts(violations, distance, threshold, CAPABILITIES)


def table3(before: dict, after: dict, acc_before: float | None, acc_after: float | None) -> list[dict]:
    rows = []
    for metric, key in (("N_V", "violations"), ("GT_A", "gt_a"), ("GT_B", "gt_b")):
        rec = {"metric": metric}
        for cr in list(CAPABILITIES) + ["ALL"]:
            rate = fixing_rate(before[cr][key], after[cr][key])
            rec[cr] = None if rate is None else round(100 * rate, 2)
            rec[f"{cr} before→after"] = f"{before[cr][key]}→{after[cr][key]}"
        rows.append(rec)
    rows.append({"metric": "downstream accuracy", "ALL": None if acc_after is None or acc_before is None
                 else round(100 * (acc_after - acc_before), 2),
                 "ALL before→after": f"{acc_before if acc_before is None else round(acc_before, 4)}→"
                                     f"{acc_after if acc_after is None else round(acc_after, 4)}"})
    return rows


def run_repair(cfg: CheckrayConfig, violations_dir: str, model: str, out: str) -> tuple[RunDir, list[Section]]:
    from engine.runtime import init_ray
    from jobs.costello.job import CostelloConfig

    rc: RepairConfig = cfg.section("repair")
    src = RunDir(violations_dir)
    spec, wide, before_v, meta = load_source(src, model)
    cc = CostelloConfig.model_validate(meta["config"].get("costello") or {})
    cc = cc.model_copy(update={"distance": rc.distance or cc.distance, "threshold": rc.threshold or cc.threshold})
    violated, benign = split_triples(wide, before_v, cc.distance, cc.threshold)
    if not violated:
        raise InputError(f"repair: model '{model}' has no violation under {cc.distance}/{cc.threshold} to repair")
    run = RunDir(out)
    if "://" in run.uri:
        raise InputError(f"{out}: repair saves a model directory and needs a local --out")
    init_ray(cfg.runtime)
    model_dir = run.path("model")
    settings = RepairSettings.model_validate(rc.model_dump(exclude={"model", "backend", "distance", "threshold"}))

    def train(ctx: StageContext):
        from actors.costello.repair import repair_in_actor

        result = repair_in_actor(spec, violated, benign, settings, model_dir, rc.backend)
        hist = pa.Table.from_pylist([{**h, "loss_before": result["loss_before"], "loss_after": result["loss_after"],
                                      "seconds": result["seconds"], "device": result["device"]}
                                     for h in result["history"]])
        return {"history": hist}

    def retest(ctx: StageContext):
        from actors.costello.embedders import EmbedderSpec, embed_all
        from jobs.costello.job import texts_to_embed
        from jobs.costello.validate import score_model

        train_t = src.read_table("stages/seeds/train.parquet")
        dictionary = src.read_table(f"stages/embed/dict-{model}.parquet")
        texts = texts_to_embed(wide, train_t, dictionary)
        repaired = EmbedderSpec(name=f"{model}-repaired", model=model_dir, pooling="model",
                                max_length=spec["max_length"], encode_batch_size=spec["encode_batch_size"])
        vectors = embed_all(texts, [repaired], cc.backend, cc.batch_size)[repaired.name]
        seed = meta["config"].get("seed", 0) if cc.seed is None else cc.seed
        viol, thr, accs = score_model(model, dict(zip(texts, vectors)), wide, train_t, dictionary, cc, seed)
        return {"violations": viol, "classifiers": pa.table({"accuracy": pa.array(accs, pa.float64())})}

    runner = StageRunner(run, on_stage=stage_printer("repair"))
    fp = [model, src.uri, settings, cc.distance, cc.threshold, len(violated), len(benign)]
    runner.run_all([Stage("train", train, config=fp, version="1"),
                    Stage("retest", retest, inputs=("train",), config=fp, version="1")])
    after_v = runner.output("retest", "violations")
    history = runner.output("train", "history")
    acc_b = _mean_accuracy(src, model)
    acc_a_col = runner.output("retest", "classifiers").column("accuracy").to_pylist()
    acc_a = float(np.mean(acc_a_col)) if acc_a_col else None
    rows = table3(counts(before_v, cc.distance, cc.threshold), counts(after_v, cc.distance, cc.threshold), acc_b, acc_a)
    run.write_table("violations.parquet", after_v)
    run.write_table("history.parquet", history)
    run.write_table("fixing.parquet", pa.Table.from_pylist([{k: (None if v is None else str(v)) for k, v in r.items()}
                                                            for r in rows]))
    h = history.to_pylist()
    summary = (f"{model}: {len(violated)} violated and {len(benign)} benign triples; {settings.epochs} epochs of SGD "
               f"(lr {settings.learning_rate}, alpha {settings.alpha}); triplet loss on the violated triples probed "
               f"{h[0]['loss_before']:.4f} -> {h[0]['loss_after']:.4f}; model saved to {model_dir}.")
    sections = [Section(f"COSTELLO repair: fixing rate (Table 3 layout), {cc.distance} / {cc.threshold}",
                        [table_html(rows), table_html(h)], summary)]
    run.write_text("report.html", render("checkray · costello repair", sections, subtitle=src.uri))
    return run, sections


def _mean_accuracy(src: RunDir, model: str) -> float | None:
    if not src.exists("stages", "validate", "classifiers.parquet"):
        return None
    t = src.read_table("stages/validate/classifiers.parquet")
    acc = [a for m, a in zip(t["model"].to_pylist(), t["accuracy"].to_pylist()) if m == model]
    return float(np.mean(acc)) if acc else None


def repair_command(
    violations: str = typer.Option(..., "--violations", help="A costello run directory."),
    model: str = typer.Option(..., "--model", help="Embedder name to repair (as in the embedders file)."),
    out: str = typer.Option(..., "--out", "-o", help="Output directory for the repaired model and its re-test."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML config with a 'repair' section."),
    epochs: Optional[int] = typer.Option(None, "--epochs"),
    learning_rate: Optional[float] = typer.Option(None, "--lr"),
    alpha: Optional[float] = typer.Option(None, "--alpha"),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="zero|min|mu-2sigma|mu-sigma (default: the run's)."),
):
    """Fine-tune an embedding model on its COSTELLO violations, then re-test it."""
    cfg = load_config(config, {"repair.epochs": epochs, "repair.learning_rate": learning_rate, "repair.alpha": alpha,
                               "repair.threshold": threshold})
    run, sections = run_repair(cfg, violations, model, out)
    typer.echo(f"repair: {sections[0].summary} -> {run.path('fixing.parquet')}, violations.parquet, report.html")
