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


def suite_table(seeds: pa.Table, expanded: pa.Table, filler: str, seed: int) -> pa.Table:
    """Seeds and expansions as test cases. An expansion keeps its seed's label and names
    the seed in ``meta.seed_case_id``; its provenance template is the reference production."""
    rows, seen = [], set()
    parsed = {r["case_id"]: r for r in expanded.to_pylist()}
    for sd in seeds.to_pylist():
        p = parsed[sd["case_id"]]
        sources = ",".join(json.loads(sd["sources"]))
        accepts = json.loads(sd["accepts"])
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
            for fl in m["fills"]:
                cid = case_id(METHOD, sd["suite"], fl["text"], sd["label"])
                if cid in seen:
                    continue
                seen.add(cid)
                rows.append(
                    {
                        "case_id": cid,
                        "suite": sd["suite"],
                        "method": METHOD,
                        "capability": sd["capability"],
                        "text": fl["text"],
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
    return make_cases(rows)
