"""S²LCT test cases: seeds and their validated expansions in the common schema (pure).

A seed is an MFT case labeled by its capability spec (a capability that accepts several
labels, "positive or neutral", lists them in ``expected_labels``: CheckList's "not negative"); an expansion is an MFT case with its
seed's label, capability and suite, naming the seed in ``meta.seed_case_id``. Provenance:
``source_id`` the corpus sentence(s), ``template_id`` the spec template (seeds) or the
reference production (expansions), ``generator`` the parser (+ the mask filler).
"""

from __future__ import annotations

import json

import pyarrow as pa

from checkray.engine.s2lct.search import METHOD
from checkray.engine.schema import case_id, make_cases

# The checks every kept expansion passed (actors/s2lct/mask_filler.py), and the check
# each rejection reason belongs to.
FILL_CHECKS = (
    "fill-word",
    "fill-ngram",
    "fill-modifier",
    "fill-denied",
    "fill-score",
    "fill-tag",
    "fill-rule",
    "fill-sentence-polarity",
)
FILL_CHECK_OF = {
    "polarity": "fill-word",
    "negation": "fill-word",
    "function-word": "fill-word",
    "repeat": "fill-word",
    "ngram": "fill-ngram",
    "modifier": "fill-modifier",
    "denied": "fill-denied",
    "score": "fill-score",
    "tag": "fill-tag",
    "tokenization": "fill-tag",
    "rule": "fill-rule",
    "sentence-polarity": "fill-sentence-polarity",
}


def wrap(seed_row: dict, core: str) -> str:
    """The seed's wrapper around a (possibly expanded) seed sentence."""
    template = seed_row.get("wrap") or "{s}"
    return template.replace("{s}", core)


def suite_table(
    seeds: pa.Table, expanded: pa.Table, filler: str, seed: int, *, with_rejected: bool = False
) -> pa.Table | tuple[pa.Table, pa.Table]:
    """Seeds and expansions as test cases. An expansion inserts into the seed sentence
    and is wrapped as its seed; it keeps its seed's label and names the seed in
    ``meta.seed_case_id``; its provenance template is the reference production. With
    ``with_rejected`` also the fills the checks refused (``rejected.parquet``'s rows)."""
    rows, seen, refused = [], set(), []
    parsed = {r["case_id"]: r for r in expanded.to_pylist()}
    for sd in seeds.to_pylist():
        p = parsed[sd["case_id"]]
        sources = ",".join(json.loads(sd["sources"]))
        accepts = json.loads(sd["accepts"])
        seed_checks = json.loads(sd.get("checks") or "[]")
        seen.add(sd["case_id"])
        rows.append(
            {
                "case_id": sd["case_id"],
                "suite": sd["suite"],
                "method": METHOD,
                "capability": sd["capability"],
                "text": sd["text"],
                "expected_label": sd["label"],
                "expected_labels": accepts or None,  # "positive or neutral" (LC4, LC6, LC11)
                "test_type": "MFT",
                "checks": seed_checks,
                "provenance": {
                    "source_id": sources,
                    "template_id": sd["template_id"],
                    "generator": p["parser"],
                    "seed": seed,
                },
                "meta": {
                    "kind": "seed",
                    "capability_id": sd["capability_id"],
                    "rules": json.loads(sd["rules"]),
                    "accepts": accepts,
                    "label_source": sd["label_source"],
                    "tree": p["tree"],
                },
            }
        )
        for m in json.loads(p["expansions"]):
            for text, reason, detail in m.get("refused", []):
                full = wrap(sd, text)
                refused.append(
                    {
                        "case_id": case_id(METHOD, sd["suite"], full, sd["label"]),
                        "suite": sd["suite"],
                        "capability": sd["capability"],
                        "text": full,
                        "expected_label": sd["label"],
                        "check": FILL_CHECK_OF.get(reason, f"fill-{reason}"),
                        "reason": detail,
                        "source": sd["case_id"],
                        "meta": {"kind": "expansion", "capability_id": sd["capability_id"], "masked": m["masked"]},
                    }
                )
            for fl in m["fills"]:
                text = wrap(sd, fl["text"])
                cid = case_id(METHOD, sd["suite"], text, sd["label"])
                if cid in seen:
                    continue
                seen.add(cid)
                rows.append(
                    {
                        "case_id": cid,
                        "suite": sd["suite"],
                        "method": METHOD,
                        "capability": sd["capability"],
                        "text": text,
                        "checks": seed_checks + list(FILL_CHECKS),
                        "expected_label": sd["label"],
                        "expected_labels": accepts or None,  # "positive or neutral" (LC4, LC6, LC11)
                        "test_type": "MFT",
                        "provenance": {
                            "source_id": sources,
                            "template_id": m["reference"],
                            "generator": f"{p['parser']}+{filler}",
                            "seed": seed,
                        },
                        "meta": {
                            "kind": "expansion",
                            "capability_id": sd["capability_id"],
                            "seed_case_id": sd["case_id"],
                            "masked": m["masked"],
                            "words": fl["words"],
                            "tags": m["tags"],
                            "production": m["production"],
                            "reference_production": m["reference"],
                            "score": round(fl["score"], 4),
                            "accepts": accepts,
                            "label_source": sd["label_source"],
                        },
                    }
                )
    cases = make_cases(rows)
    if not with_rejected:
        return cases
    from checkray.engine.case_checks import rejected_table

    return cases, rejected_table(refused)
