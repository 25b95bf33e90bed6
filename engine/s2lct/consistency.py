"""S²LCT label consistency (the paper's RQ1) checked by an offline judge (pure).

The paper has people read 200 sampled cases (half seeds, half expansions of those seeds)
and counts how often their sentiment differs from S²LCT's label (> 0.8 agreement). Here
a judge stands in for the people: a sentiment model plus a lexicon rule (VADER's compound
score, neutral within +-0.05). A plain sentiment classifier cannot read the templates
("Do I think that ... ? no"): those are what the suites test and where models fail. So the
verdict is **composed** the way S²LCT composes the label:

* every corpus sentence a seed was built from must have, for the judge, the label its
  search rule required (the corpus label, or "neutral" from the lexicon proxy);
* an expansion must also keep the judge's label of its seed (the inserted word did not
  change what the judge reads);
* the template's own logic (negation, "but I think that", "? no") is taken as given.

The **direct** verdict (the judge's label on the whole case text, against the expected
label or the labels it accepts) is reported beside it: for LC1/LC2 it is the same check,
for the template capabilities it mostly measures the judge failing the capability.

The judge is a model of the registry (``choose_judge``): ``s2lct.consistency.judge``, or
by default the one with the best held-out accuracy among those that did not train on the
sentences the seeds come from (measured: the share of those sentences found in the
model's training split, at most ``max_overlap``). Lexicon models are not candidates:
VADER is the second judge anyway. The job loads the judge and runs it; ``judge_reading`` turns
its probabilities into what the verdicts compare.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.benchmark.families import has_trait
from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.errors import InputError
from checkray.engine.s2lct.models import training_split
from checkray.engine.s2lct.spec import CapabilitySpec

NO_ANSWER = "no answer"  # a judge that gave no label (an LLM that named none)
VADER_NEUTRAL = 0.05  # VADER's documented compound-score threshold
BAND = (1 / 3, 2 / 3)  # CheckList's neutral band on P(positive) for a binary judge


def normalize(text: str) -> str:
    """Text compared across tokenizations (PTB ``n't``, lowercase corpora): letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def sample_cases(rows: Sequence[Mapping[str, Any]], per_capability: int, seed: int) -> list[dict]:
    """Per capability, about half seeds drawn at random and half expansions of those
    seeds (one per seed first, as the paper samples expansions of its sampled seeds);
    seeds without expansions leave their share to other expansions of the capability.
    ``rows`` carry ``case_id``, ``capability_id``, ``kind`` and (expansions) ``seed_case_id``."""
    rng = random.Random(f"consistency:{seed}")
    by_cap: dict[str, dict[str, list]] = defaultdict(lambda: {"seed": [], "expansion": []})
    for r in rows:
        by_cap[r["capability_id"]][r["kind"]].append(dict(r))
    out = []
    for cap in sorted(by_cap, key=_cap_order):
        seeds, exps = by_cap[cap]["seed"], by_cap[cap]["expansion"]
        rng.shuffle(seeds)
        children: dict[str, list[dict]] = defaultdict(list)
        for e in exps:
            children[e["seed_case_id"]].append(e)
        want_seeds = min(len(seeds), max(math.ceil(per_capability / 2), per_capability - len(exps)))
        picked = seeds[:want_seeds]
        budget = per_capability - len(picked)
        chosen: list[dict] = []
        for round_ in range(max((len(v) for v in children.values()), default=0)):
            for sd in picked + seeds[want_seeds:]:  # the sampled seeds' expansions first
                kids = children.get(sd["case_id"], [])
                if round_ == 0:
                    rng.shuffle(kids)
                if round_ < len(kids) and len(chosen) < budget:
                    chosen.append(kids[round_])
        out.extend(picked + chosen)
    return out


def _cap_order(cap: str) -> tuple:
    digits = re.sub(r"\D", "", cap)
    return (int(digits) if digits else math.inf, cap)


@lru_cache(maxsize=1)
def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    return SentimentIntensityAnalyzer()


def lexicon_label(text: str, neutral_label: str = "neutral") -> dict:
    """VADER's compound score: >= 0.05 positive, <= -0.05 negative, else neutral."""
    score = _vader().polarity_scores(text)["compound"]
    label = "positive" if score >= VADER_NEUTRAL else "negative" if score <= -VADER_NEUTRAL else neutral_label
    return {"label": label, "neutral": label == neutral_label, "score": round(score, 3)}


def reads_as(judged: Mapping[str, Any], wanted: str, neutral_label: str = "neutral") -> bool:
    """Does a judgment (``label``, ``neutral``) give ``wanted``? A binary judge reads
    neutral by CheckList's band on P(positive) and the polar labels by argmax."""
    return bool(judged["neutral"]) if wanted == neutral_label else judged["label"] == wanted


def same_reading(a: Mapping[str, Any], b: Mapping[str, Any], *, neutral: bool) -> bool:
    return bool(a["neutral"]) == bool(b["neutral"]) if neutral else a["label"] == b["label"]


def verdicts(
    cases: Sequence[Mapping[str, Any]],
    judge: Callable[[list[str]], list[dict]],
    lexicon: Callable[[str], dict] = lexicon_label,
    neutral_label: str = "neutral",
) -> list[dict]:
    """Per sampled case: the judge's and the lexicon's readings of its parts, of the whole
    text and (expansions) of the seed text, and the composed and direct verdicts.

    A case carries ``text``, ``expected_label``, ``accepts`` (labels the capability also
    accepts), ``kind``, ``parts`` ([{"text", "needs"}]: the corpus sentences and the label
    their rule required) and, for an expansion, ``seed_text``. ``judge`` reads a batch of
    texts: one ``{"label", "neutral"}`` per text (``label`` ``NO_ANSWER`` when it gives none)."""
    texts = list(
        dict.fromkeys(
            t
            for c in cases
            for t in [c["text"], *(p["text"] for p in c["parts"]), *([c["seed_text"]] if c.get("seed_text") else [])]
        )
    )
    by_judge = dict(zip(texts, judge(texts)))
    by_lexicon = {t: lexicon(t) for t in texts}
    out = []
    for c in cases:
        accepted = {c["expected_label"], *(c.get("accepts") or [])}
        seed = c.get("seed_text")
        row = dict(c)
        row["parts"] = [
            {**p, "judge": by_judge[p["text"]]["label"], "lexicon": by_lexicon[p["text"]]["label"]} for p in c["parts"]
        ]
        for who, reading in (("judge", by_judge), ("lexicon", by_lexicon)):
            row[f"{who}_text"] = reading[c["text"]]["label"]
            row[f"{who}_seed"] = reading[seed]["label"] if seed else None
            looked = [c["text"], *(p["text"] for p in c["parts"]), *([seed] if seed else [])]
            if any(reading[t]["label"] == NO_ANSWER for t in looked):
                row[f"agree_{who}"] = None
                continue
            parts_ok = all(reads_as(reading[p["text"]], p["needs"], neutral_label) for p in c["parts"])
            kept = (
                same_reading(reading[c["text"]], reading[seed], neutral=c["expected_label"] == neutral_label)
                if seed
                else True
            )
            row[f"agree_{who}"] = parts_ok and kept
        whole = by_judge[c["text"]]
        row["agree_direct"] = (
            None if whole["label"] == NO_ANSWER else any(reads_as(whole, lab, neutral_label) for lab in accepted)
        )
        out.append(row)
    return out


def _share(values: Sequence[bool | None]) -> float | None:
    decided = [v for v in values if v is not None]
    return round(sum(decided) / len(decided), 3) if decided else None


def summarize(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Agreement per capability (and over all): composed verdict of the judge, of the
    lexicon, of both at once, and the judge's direct verdict; cases without an answer are
    left out of the shares and counted."""
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        groups[r["capability_id"]].append(r)
    out = []
    for cap in [*sorted(groups, key=_cap_order), "all"]:
        g = list(rows) if cap == "all" else groups[cap]
        both = [
            None if r["agree_judge"] is None or r["agree_lexicon"] is None else r["agree_judge"] and r["agree_lexicon"]
            for r in g
        ]
        out.append(
            {
                "capability": cap,
                "seeds": sum(r["kind"] == "seed" for r in g),
                "expansions": sum(r["kind"] == "expansion" for r in g),
                "agreement": _share([r["agree_judge"] for r in g]),
                "agreement (seeds)": _share([r["agree_judge"] for r in g if r["kind"] == "seed"]),
                "agreement (expansions)": _share([r["agree_judge"] for r in g if r["kind"] == "expansion"]),
                "lexicon agreement": _share([r["agree_lexicon"] for r in g]),
                "both agree": _share(both),
                "direct agreement": _share([r["agree_direct"] for r in g]),
                "no answer": sum(r["agree_judge"] is None for r in g),
            }
        )
    return out


def case_rows(seeds: pa.Table, suite: pa.Table, search: pa.Table, specs: Sequence[CapabilitySpec]) -> list[dict]:
    """Every case with what the judge needs: its corpus parts (text, the label their rule
    required) and, for an expansion, its seed's text. ``seeds``: the seeds stage's table;
    ``search``: the searched corpus's ``id`` and ``text``."""
    rule_label = {(sp.id, r.name): r.label for sp in specs for r in sp.search}
    text_of = dict(zip(search.column("id").to_pylist(), search.column("text").to_pylist()))
    parts = {}
    for sd in seeds.select(["case_id", "capability_id", "sources", "rules"]).to_pylist():
        pairs = zip(json.loads(sd["sources"]), json.loads(sd["rules"]))
        parts[sd["case_id"]] = [
            {"text": text_of[src], "needs": rule_label[(sd["capability_id"], rule)]} for src, rule in pairs
        ]
    rows = suite.select(["case_id", "capability", "text", "expected_label", "meta"]).to_pylist()
    text_by_id = {r["case_id"]: r["text"] for r in rows}
    out = []
    for r in rows:
        meta = json.loads(r["meta"])
        seed_id = meta.get("seed_case_id") or r["case_id"]
        out.append(
            {
                "case_id": r["case_id"],
                "capability_id": meta["capability_id"],
                "capability": r["capability"],
                "kind": meta["kind"],
                "seed_case_id": meta.get("seed_case_id"),
                "text": r["text"],
                "expected_label": r["expected_label"],
                "accepts": meta.get("accepts") or [],
                "label_source": meta.get("label_source"),
                "parts": parts[seed_id],
                "seed_text": text_by_id[seed_id] if meta["kind"] == "expansion" else None,
            }
        )
    return out


CONSISTENCY_COLUMNS = (
    "case_id capability_id capability kind seed_case_id text expected_label label_source judge_text judge_seed "
    "lexicon_text lexicon_seed agree_judge agree_lexicon agree_direct"
).split()


def consistency_row(row: Mapping[str, Any], judge: str) -> dict[str, Any]:
    """A consistency.parquet row of a verdict: parts and accepted labels as JSON."""
    out = {k: row.get(k) for k in CONSISTENCY_COLUMNS}
    out.update(judge=judge, accepts=json.dumps(row["accepts"]), parts=json.dumps(row["parts"], ensure_ascii=False))
    return out


# The judge: a model of the registry that reads the sampled cases.


def judge_reading(probs: Sequence[float], labels: Sequence[str], neutral_label: str, *, may_abstain: bool) -> dict:
    """A judge's reading ({label, neutral, p_positive}) of one text from its probabilities
    in ``labels`` order. A binary judge (no neutral label) reads neutral by CheckList's band
    on P(positive); ``may_abstain`` (a zero-shot LLM): the uniform row means it named no label."""
    row = np.asarray(probs, dtype=float)
    if may_abstain and np.ptp(row) < 1e-9:
        return {"label": NO_ANSWER, "neutral": False, "p_positive": None}
    label = labels[int(np.argmax(row))]
    p_pos = float(row[list(labels).index("positive")]) if "positive" in labels else None
    binary = neutral_label not in labels and p_pos is not None and len(labels) == 2
    neutral = BAND[0] <= p_pos <= BAND[1] if binary else label == neutral_label
    return {"label": label, "neutral": bool(neutral), "p_positive": p_pos}


def training_sentences(spec: ModelSpec) -> set[str] | None:
    """Normalized texts of the zoo split a model trained on; None when unknown."""
    if not has_trait(spec, "trained_on_corpus") or not spec.meta.get("corpus"):
        return None
    return {normalize(t) for t in training_split(spec, spec.meta["corpus"])}


def overlap(spec: ModelSpec, texts: Sequence[str]) -> float | None:
    """Share of ``texts`` in the model's training split: 0 for models that do not train
    (lexicons, zero-shot LLMs), None when unknown (no corpus recorded)."""
    if has_trait(spec, "lexicon") or has_trait(spec, "zero_shot"):
        return 0.0
    seen = training_sentences(spec)
    if seen is None or not texts:
        return None
    return round(sum(normalize(t) in seen for t in texts) / len(texts), 3)


@dataclass(frozen=True)
class JudgeChoice:
    spec: ModelSpec
    overlap: float | None  # the share of the part texts it trained on (None: unknown)
    notes: tuple[str, ...]  # for the report


def choose_judge(specs: Sequence[ModelSpec], name: str | None, texts: Sequence[str], max_overlap: float) -> JudgeChoice:
    """The judge (``name``, or the most accurate model that trained on at most
    ``max_overlap`` of ``texts``; lexicons are never candidates), with notes for the report."""
    candidates = _judge_candidates(specs, name)
    measured = [(sp, overlap(sp, texts)) for sp in candidates]
    clean = [(sp, o) for sp, o in measured if o is None or o <= max_overlap]
    spec, share = max(clean or measured, key=lambda so: so[0].accuracy if so[0].accuracy is not None else -1.0)
    notes = [
        f"judge: {spec.name} ({spec.family}, held-out accuracy {spec.accuracy}); trained on "
        + ("an unknown share" if share is None else f"{share:.0%}")
        + f" of the {len(texts)} corpus sentences the sampled seeds were built from"
    ]
    if share is not None and share > max_overlap:
        who = "the judge" if name else "every candidate judge"
        notes.append(
            f"WARNING: {who} trained on more than {max_overlap:.0%} of those sentences "
            f"({', '.join(f'{sp.name} {o:.0%}' for sp, o in measured if o is not None)}): its readings of the "
            "corpus parts repeat labels it was trained on, so agreement is inflated. Give a judge trained on other "
            "data (s2lct.consistency.judge), e.g. a zero-shot LLM."
        )
    return JudgeChoice(spec, share, tuple(notes))


def _judge_candidates(specs: Sequence[ModelSpec], name: str | None) -> list[ModelSpec]:
    if name:
        spec = next((sp for sp in specs if sp.name == name), None)
        if spec is None:
            raise InputError(f"s2lct.consistency.judge: no model named {name} among the models given")
        return [spec]
    candidates = [sp for sp in specs if not has_trait(sp, "lexicon")]
    if not candidates:
        raise InputError("s2lct consistency: no model to judge with (only lexicon models given)")
    return candidates
