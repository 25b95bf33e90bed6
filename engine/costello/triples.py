"""COSTELLO's contrastive relationships (§4.2.2): variants -> (seed, s+, s-) triples.

| CR  | positive s+ (closer)    | negative s- (farther)   | property            |
| --- | ----------------------- | ----------------------- | ------------------- |
| CR1 | synonym of word w       | antonym of the same w   | accuracy            |
| CR2 | gender entity swap      | synonym substitution    | fairness            |
| CR3 | synonym substitution    | semantic inversion      | accuracy            |
| CR4 | shared-word synonym     | shared-word antonym     | accuracy (matching) |

A triple is three rows of the common test-case schema (method ``costello``, capability
``CR1``…``CR4``): the seed (``MFT``, its gold label when the corpus has one), the
positive and the negative variant (``DIR`` rows whose ``perturbs`` is the seed row, with
``relation`` ``closer`` / ``farther``). ``meta.triple`` joins the three; for CR4 the
pair's second sentence is in ``text_pair``. The benchmark reports closer/farther rows as
not testable on a classifier: they are checked on embeddings (``engine/contrast_metrics``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from checkray.engine.costello.mutations import Variant
from checkray.engine.schema import case_id, make_cases

METHOD = "costello"
CAPABILITIES = ("CR1", "CR2", "CR3", "CR4")
# (positive operator, negative operator) per CR
RELATIONSHIPS = {
    "CR1": ("synonym", "antonym"),
    "CR2": ("gender", "synonym"),
    "CR3": ("synonym", "inversion"),
    "CR4": ("pair_synonym", "pair_antonym"),
}


@dataclass(frozen=True)
class Seed:
    id: str
    text: str
    label: str | None = None
    text_pair: str | None = None  # semantic matching pairs (CR4)


@dataclass(frozen=True)
class Triple:
    triple: str
    capability: str
    seed: Seed
    positive: Variant
    negative: Variant
    suite: str | None = None  # None: the suite the job names (generated triples)


# CR2's farther sentence must change the meaning noticeably: a correct gender swap is "no
# change" under the fairness premise, so a farther edit that keeps the meaning is a tie.
def cr2_farther(variants: Sequence[Variant]) -> Variant | None:
    """CR2's negative: the first antonym, a clear change of meaning. A synonym of different
    strength is not used: read one by one, those were the same judgement in other words
    (horrible -> atrocious, healthy -> sound, collide -> clash), which makes the ordering a
    tie."""
    return next((v for v in variants if v.op == "antonym"), None)


def cr3_closers(synonyms: Sequence[Variant], inversion: Variant) -> list[Variant]:
    """CR3's closer candidates beside a sentence-level inversion that names its edit: the
    synonyms of a word the edit changed, so the triple sets a synonym of that word against
    a person's reversal of it. Read at size, a closer at another word ("they all agreed" ->
    "fit", "cry their hearts out" -> "call") was right in 10 of 22 triples, one at the
    edited word in 75 of 98."""
    edited = {w.lower() for w in (inversion.word or "").split()}
    return [v for v in synonyms if v.word and v.word.lower() in edited]


def combine(
    seed: Seed,
    variants: Sequence[Variant],
    per_seed: int = 1,
    cr3_positive: str = "synonym",
    cr2_negative: str = "shift",
) -> list[Triple]:
    """Every CR the seed's variants allow, at most ``per_seed`` triples per CR.

    CR1 and CR4 need a synonym and an antonym of the SAME word (the comparison is only
    meaningful then); CR3 takes the first variant of each operator. CR3's positive is the
    word-level ``synonym`` or the authors' dense ``synonym_dense`` substitution. CR2's
    negative is ``cr2_farther`` (``cr2_negative="shift"``) or, as the paper, the first
    synonym (``"synonym"``). Rejected variants (``check`` set) are never used.
    """
    by_op: dict[str, list[Variant]] = {}
    for v in variants:
        if v.check:
            continue
        if v.text.strip() and v.text.strip() != seed.text.strip():
            by_op.setdefault(v.op, []).append(v)
    triples: list[Triple] = []

    def add(cr: str, pos: Variant, neg: Variant) -> None:
        tid = case_id(METHOD, cr, seed.id, pos.text, neg.text, pos.text_pair, neg.text_pair)
        triples.append(Triple(tid, cr, seed, pos, neg))

    for cr in ("CR1", "CR4"):
        pos_op, neg_op = RELATIONSHIPS[cr]
        antonym_at: dict[int, Variant] = {}
        for v in by_op.get(neg_op, []):
            antonym_at.setdefault(v.index, v)
        same_word = [(s, antonym_at[s.index]) for s in by_op.get(pos_op, []) if s.index in antonym_at]
        for pos, neg in same_word[:per_seed]:
            add(cr, pos, neg)
    for cr in ("CR2", "CR3"):
        pos_op, neg_op = RELATIONSHIPS[cr]
        if cr == "CR3":
            pos_op = cr3_positive
        negatives = by_op.get(neg_op, [])
        positives = by_op.get(pos_op, [])
        if cr == "CR2" and cr2_negative == "shift":
            farther = cr2_farther([v for op in ("synonym", "antonym") for v in by_op.get(op, [])])
            negatives = [farther] if farther else []
        if cr == "CR3" and negatives and negatives[0].word:
            positives = cr3_closers(positives, negatives[0])
        for pos, neg in list(zip(positives, negatives))[:per_seed]:
            if pos.text != neg.text or pos.text_pair != neg.text_pair:
                add(cr, pos, neg)
    return triples


def assemble(
    seeds: Iterable[Seed],
    variants: Mapping[str, Sequence[Variant]],
    suite: str,
    per_seed: int = 1,
    cr3_positive: str = "synonym",
    cr2_negative: str = "shift",
) -> list[Triple]:
    out: list[Triple] = []
    seen: set[str] = set()
    for seed in seeds:
        for t in combine(seed, variants.get(seed.id, ()), per_seed, cr3_positive, cr2_negative):
            if t.triple not in seen:
                seen.add(t.triple)
                out.append(t)
    return out


def _meta(t: Triple, role: str, v: Variant | None) -> dict:
    meta = {"triple": t.triple, "role": role}
    if v is not None:
        meta.update(operator=v.op, word=v.word, replacement=v.replacement)
    return meta


def _checks(v: Variant) -> list[str] | None:
    return [c for c in v.checks.split(",") if c] or None if v.checks else None


def _provenance(t: Triple, operator: str) -> dict:
    return {"source_id": t.seed.id, "template_id": t.capability, "generator": operator, "seed": None}


def triples_to_cases(triples: Sequence[Triple], suite: str) -> pa.Table:
    rows = []
    for t in triples:
        seed_case = case_id(METHOD, t.suite or suite, t.triple, "seed")
        common = dict(suite=t.suite or suite, method=METHOD, capability=t.capability)
        rows.append(
            dict(
                common,
                case_id=seed_case,
                text=t.seed.text,
                text_pair=t.seed.text_pair,
                expected_label=t.seed.label,
                test_type="MFT",
                provenance=_provenance(t, "seed"),
                meta=_meta(t, "seed", None),
            )
        )
        for role, v, relation in (("positive", t.positive, "closer"), ("negative", t.negative, "farther")):
            rows.append(
                dict(
                    common,
                    case_id=case_id(METHOD, t.suite or suite, t.triple, role),
                    text=v.text,
                    text_pair=v.text_pair,
                    test_type="DIR",
                    perturbs=seed_case,
                    relation=relation,
                    provenance=_provenance(t, v.op),
                    meta=_meta(t, role, v),
                    checks=_checks(v),
                )
            )
    return make_cases(rows)


def triple_table(cases: pa.Table) -> pa.Table:
    """One row per triple from the 3-row layout: triple, capability, seed/positive/negative
    texts (and pair texts), seed label, operators, substituted word."""
    by_triple: dict[str, dict] = {}
    for row in cases.to_pylist():
        meta = json.loads(row["meta"] or "{}")
        rec = by_triple.setdefault(
            meta["triple"], {"triple": meta["triple"], "capability": row["capability"], "suite": row["suite"]}
        )
        role = meta["role"]
        rec[role] = row["text"]
        rec[f"{role}_pair"] = row["text_pair"]
        if role == "seed":
            rec["label"] = row["expected_label"]
        else:
            rec[f"{role}_op"] = meta.get("operator")
            rec[f"{role}_word"] = meta.get("word")
            rec[f"{role}_replacement"] = meta.get("replacement")
    cols = [
        "triple",
        "capability",
        "suite",
        "seed",
        "positive",
        "negative",
        "seed_pair",
        "positive_pair",
        "negative_pair",
        "label",
        "positive_op",
        "negative_op",
        "positive_word",
        "positive_replacement",
        "negative_word",
        "negative_replacement",
    ]
    recs = [r for r in by_triple.values() if all(k in r for k in ("seed", "positive", "negative"))]
    return pa.table({c: pa.array([r.get(c) for r in recs], pa.string()) for c in cols})


def counts_per_cr(triples: pa.Table) -> dict[str, int]:
    caps = triples.column("capability").to_pylist()
    return {cr: caps.count(cr) for cr in CAPABILITIES}


# The CRs each operator's variants serve (a rejected variant is reported under them).
OPERATOR_CRS = {
    "seed": "CR1,CR2,CR3",  # a seed refused before any operator (``seed_slip``, ``seed_grammar``)
    "synonym": "CR1,CR2,CR3",
    "antonym": "CR1,CR2",
    "gender": "CR2",
    "inversion": "CR3",
    "synonym_dense": "CR3",
    "pair_synonym": "CR4",
    "pair_antonym": "CR4",
}


def rejected_variants(
    seeds: Sequence[Seed], variants: Mapping[str, Sequence[Variant]], triples: Sequence[Triple], suite: str
) -> pa.Table:
    """``rejected.parquet``'s rows: every variant a check rejected (its check and reason),
    and each kept gender swap that found no CR2 farther sentence (check ``cr2_farther``)."""
    from checkray.engine.case_checks import rejected_table

    with_cr2 = {t.seed.id for t in triples if t.capability == "CR2"}
    with_cr3 = {t.seed.id for t in triples if t.capability == "CR3"}
    rows = []
    for seed in seeds:
        for v in variants.get(seed.id, ()):
            check, reason = v.check, v.reason
            if not check and v.op == "gender" and seed.id not in with_cr2:
                check = "cr2_farther"
                reason = "no antonym passed the checks, and CR2's farther sentence must change the meaning"
            if not check and v.op == "inversion" and seed.id not in with_cr3:
                check = "cr3_closer"
                where = f" of the edited words '{v.word}'" if v.word else ""
                reason = f"no synonym{where} passed the checks, and CR3's closer sentence is a synonym substitution"
            if not check:
                continue
            meta = {"seed_id": seed.id, "operator": v.op, "word": v.word, "replacement": v.replacement}
            meta["checks_passed"] = [c for c in v.checks.split(",") if c]
            rows.append(
                {
                    "case_id": case_id(METHOD, suite, seed.id, v.op, v.text, v.text_pair, check),
                    "suite": suite,
                    "capability": OPERATOR_CRS.get(v.op),
                    "text": v.text,
                    "text_pair": v.text_pair,
                    "expected_label": None,
                    "check": check,
                    "reason": reason,
                    "source": seed.text if seed.text_pair is None else f"{seed.text} [SEP] {seed.text_pair}",
                    "meta": meta,
                }
            )
    return rejected_table(rows)


def rejected_inversion_pairs(refused: pa.Table, suite: str) -> pa.Table:
    """``rejected.parquet``'s rows for the inversion table's sentence pairs that the cut
    refused (``contrast_sentences.refused_table``): each under CR3 with its check and reason."""
    from checkray.engine.case_checks import rejected_table

    rows = [
        {
            "case_id": case_id(METHOD, suite, "inversion", r["sentence"], r["reversed"], r["check"]),
            "suite": suite,
            "capability": "CR3",
            "text": r["reversed"],
            "check": r["check"],
            "reason": r["reason"],
            "source": r["sentence"],
            "meta": {"operator": "inversion", "review": r["review"]},
        }
        for r in refused.to_pylist()
    ]
    return rejected_table(rows)
