"""Report sections of the S²LCT job (also used by the demo's combined report), built from
what the stages wrote: nothing here computes a result."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from checkray.engine.report import Section, figure_html, table_html
from checkray.engine.s2lct.config import filler_name
from checkray.engine.s2lct.spec import CapabilitySpec
from checkray.engine.stages import StageRunner


@dataclass(frozen=True)
class Consistency:
    """The consistency stage's outputs."""

    cases: pa.Table  # the verdict of every sampled case (consistency.parquet)
    summary: list[dict]  # agreement per capability (consistency_summary.parquet)
    info: dict  # judge, overlap, notes


@dataclass(frozen=True)
class Evaluation:
    """What the evaluation stages wrote, as the report shows it."""

    table3: list[dict]
    coverage: list[dict] = field(default_factory=list)
    explanations: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # a step that had no model to run on
    consistency: Consistency | None = None


def _counts(suite: pa.Table) -> dict[str, Counter]:
    kinds: dict[str, Counter] = {}
    for cap, meta in zip(suite.column("capability").to_pylist(), suite.column("meta").to_pylist()):
        kinds.setdefault(cap, Counter())[json.loads(meta)["kind"]] += 1
    return kinds


def generation_section(runner: StageRunner, suite: pa.Table, capabilities: Sequence[CapabilitySpec], s) -> Section:
    seeds = runner.output("seeds").to_pylist()
    expanded = {r["case_id"]: r for r in runner.output("expand").to_pylist()}
    masked_per: Counter = Counter()
    rejected: dict[str, Counter] = {}
    parsers = set()
    for sd in seeds:
        p = expanded[sd["case_id"]]
        parsers.add(p["parser"])
        for m in json.loads(p["expansions"]):
            masked_per[sd["capability_id"]] += 1
            rejected.setdefault(sd["capability_id"], Counter()).update(m["rejected"])
    found = {sd["capability_id"]: json.loads(sd["found"]) for sd in seeds}
    kinds = _counts(suite)
    rows = []
    for spec in capabilities:
        k = kinds.get(spec.name, Counter())
        rows.append(
            {
                "capability": spec.name,
                "sentences found (per rule)": ", ".join(f"{r}: {n}" for r, n in found.get(spec.id, {}).items()) or "0",
                "seeds": k["seed"],
                "masked sentences": masked_per[spec.id],
                "expansions": k["expansion"],
                "fills rejected (reason: count)": ", ".join(
                    f"{r}: {n}" for r, n in sorted(rejected.get(spec.id, {}).items())
                ),
            }
        )
    n_seeds = sum(k["seed"] for k in kinds.values())
    n_exp = sum(k["expansion"] for k in kinds.values())
    summary = (
        f"{n_seeds} seeds and {n_exp} expansions in {len(kinds)} capabilities; parser: {', '.join(sorted(parsers))}; "
        f"mask filler: {filler_name(s.filler)}; k = {s.k} masked sentences per seed, up to {s.filler.keep} "
        f"validated fills each."
    )
    if any(sd["label_source"] == "lexicon-proxy" for sd in seeds):
        summary += (
            " The corpus has no neutral label: a sentence without any polar word (VADER/AFINN) "
            "stands for a neutral one (meta.label_source = lexicon-proxy)."
        )
    return Section("S²LCT · seeds and expansions per capability", [table_html(rows)], summary)


def rejections_section(runner: StageRunner, suite: pa.Table, examples: int = 2) -> Section:
    """Candidates the automatic checks refused (rejected.parquet), per check, with examples."""
    from checkray.engine.case_checks import rejection_summary

    rejected = runner.output("suite", "rejected")
    rows = rejection_summary(rejected, suite.num_rows)
    shown: dict[str, list[str]] = {}
    for check, text, reason in zip(*(rejected.column(c).to_pylist() for c in ("check", "text", "reason"))):
        if len(shown.setdefault(check, [])) < examples:
            shown[check].append(f"{text} [{reason}]")
    for row in rows:
        row["examples"] = " | ".join(shown.get(row["check"], []))
    return Section(
        "S²LCT · candidates rejected by the automatic checks",
        [table_html(rows)],
        "Seeds (seed-form, seed-polarity, seed-denied-whole, seed-label-confidence) and fills (fill-*) that a check refused; every one is in "
        "rejected.parquet with its reason; every suite row lists the checks it passed (column checks).",
    )


def examples_section(suite: pa.Table, per_capability: int = 2) -> Section:
    rows = suite.to_pylist()
    seeds = {r["case_id"]: r for r in rows if json.loads(r["meta"])["kind"] == "seed"}
    children: dict[str, list[dict]] = {}
    for r in rows:
        meta = json.loads(r["meta"])
        if meta["kind"] == "expansion":
            children.setdefault(meta["seed_case_id"], []).append({**r, "m": meta})
    out, shown = [], Counter()
    for cid, seed in seeds.items():
        if shown[seed["capability"]] >= per_capability or cid not in children:
            continue
        shown[seed["capability"]] += 1
        for child in children[cid][:3]:
            out.append(
                {
                    "capability": seed["capability"].split(":")[0],
                    "label": seed["expected_label"],
                    "seed": seed["text"],
                    "masked": child["m"]["masked"],
                    "production → reference": f"{child['m']['production']} → {child['m']['reference_production']}",
                    "expansion": child["text"],
                }
            )
    return Section(
        "S²LCT · example expansions",
        [table_html(out)],
        "Seeds with masked sentences from Algorithm 1 and the validated fills.",
    )


def grammar_section(grammar: pa.Table, runner: StageRunner, top: int = 25) -> Section:
    trees = runner.output("grammar", "sources").column("trees")[0].as_py()
    documents = runner.output("parse", "info").column("reference_documents")[0].as_py()
    lhs = Counter(grammar.column("lhs").to_pylist())
    rows = grammar.sort_by([("count", "descending")]).slice(0, top).to_pylist()
    summary = (
        f"{grammar.num_rows} distinct productions over {len(lhs)} left-hand sides, from {trees} parse trees "
        f"({documents} reference documents, plus the searched corpus when configured). Most frequent:"
    )
    return Section("S²LCT · reference grammar", [table_html(rows)], summary)


def table3_section(evaluation: Evaluation) -> Section:
    rows = [
        {
            "capability": r["capability"],
            "model": r["model"],
            "#seeds": r["seeds"],
            "seed fails %": r["seed_fail_pct"],
            "#exps": r["expansions"],
            "exp fails %": r["exp_fail_pct"],
            "#pass→fail": r["pass_to_fail"],
        }
        for r in sorted(evaluation.table3, key=lambda r: (r["capability"], r["model"]))
    ]
    return Section(
        "S²LCT · Table 3 per model",
        [table_html(rows, max_rows=400)],
        "Failure rates of seeds and expansions per capability and model; pass→fail counts expansions "
        "that fail while their seed passes.",
    )


def coverage_section(evaluation: Evaluation) -> Section:
    import plotly.express as px

    blocks = []
    if evaluation.coverage:
        long = [
            {**r, "metric": m, "value": r[m], "panel": f"{r['model']} · {r.get('neurons', 'mean')} neurons"}
            for r in evaluation.coverage
            for m in ("BoundCov", "SActCov")
        ]
        fig = px.line(
            long,
            x="cases",
            y="value",
            color="suite",
            facet_col="metric",
            facet_row="panel",
            markers=True,
            render_mode="svg",  # the shipped plotly.js draws SVG traces only (engine/report.py)
            title="Neuron boundary coverage (bounds from the model's training sentences)",
        )
        blocks += [figure_html(fig), table_html(evaluation.coverage)]
    summary = " ".join(evaluation.notes) or (
        "BoundCov and SActCov (Eq. 3–4) of equal-size random samples of the "
        "S²LCT suite and of the CheckList template suite, per neuron reading (mean: a unit's mean over the tokens; "
        "token: every token's value)."
    )
    return Section("S²LCT · neuron coverage", blocks, summary)


def explanations_section(evaluation: Evaluation) -> Section:
    return Section(
        "S²LCT · minimal-token explanations",
        [table_html(evaluation.explanations)],
        "Eq. 5: tokens unmasked in occlusion-attribution order until the wrong label keeps "
        "probability >= the threshold.",
    )


def labels_section(notes) -> Section:
    """One line per capability whose rules need a label the corpus does not have."""
    rows = [{"capability": n.capability, "warning": n.message} for n in notes]
    return Section(
        "S²LCT · labels the corpus does not have",
        [table_html(rows)],
        f"{len(notes)} capabilities search for a label the corpus lacks "
        f"({sum(n.seedless for n in notes)} of them get no seeds at all).",
    )


def consistency_section(consistency: Consistency) -> Section:
    info = consistency.info
    rows = consistency.cases.to_pylist()
    disagree = [
        {
            "capability": r["capability_id"],
            "kind": r["kind"],
            "text": r["text"],
            "S²LCT label": r["expected_label"],
            "parts (needs → judge / lexicon)": "; ".join(
                f"{p['text'][:80]} ({p['needs']} → {p['judge']} / {p['lexicon']})" for p in json.loads(r["parts"])
            ),
            "judge on seed → on text": f"{r['judge_seed'] or '—'} → {r['judge_text']}",
            "lexicon agrees": r["agree_lexicon"],
        }
        for r in rows
        if r["agree_judge"] is False
    ]
    summary = (
        f"{len(rows)} sampled cases checked by {info.get('judge')} (a sentiment model) and VADER's compound score. "
        + " ".join(info.get("notes") or [])
        + " Agreement = the corpus sentences each case was built from read with the label their rule required, and an"
        " expansion reads as its seed; direct = the judge's label on the whole text (for the template capabilities"
        " this mostly measures the judge failing the capability). The paper's people: > 0.8."
    )
    blocks = [table_html(consistency.summary), table_html(disagree, max_rows=200)]
    return Section("S²LCT · label consistency (offline judge)", blocks, summary)


def s2lct_sections(
    runner: StageRunner,
    suite: pa.Table,
    grammar: pa.Table,
    capabilities: Sequence[CapabilitySpec],
    s,
    evaluation: Evaluation | None = None,
    label_notes=(),
) -> list[Section]:
    sections = [labels_section(label_notes)] if label_notes else []
    sections += [
        generation_section(runner, suite, capabilities, s),
        rejections_section(runner, suite),
        examples_section(suite),
        grammar_section(grammar, runner),
    ]
    if evaluation is not None:
        sections += [table3_section(evaluation), coverage_section(evaluation)]
        if evaluation.consistency is not None:
            sections.append(consistency_section(evaluation.consistency))
        if evaluation.explanations:
            sections.append(explanations_section(evaluation))
    return sections
