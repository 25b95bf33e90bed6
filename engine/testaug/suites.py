"""TestAug's suites from the filtered and expanded cases: T_TestAug (``<suite>-gpt``, the
valid generated cases, and ``<suite>-expansion``, the cases of the new templates) and the
template-only baseline T_CheckList; and the annotation sheet of each description's
phase-1 sample."""

from __future__ import annotations

import json

import pyarrow as pa

from checkray.engine.schema import case_id, make_cases
from checkray.engine.templates.expand import expand
from checkray.engine.testaug.prompt import Description

METHOD = "testaug"  # the test-case schema's method column


def build_suites(
    descs: list[Description],
    valid: pa.Table,
    expanded: pa.Table,
    *,
    suite: str,
    baseline_nsamples: int,
    generator: str,
    seed: int,
) -> tuple[pa.Table, pa.Table, list[dict]]:
    """(TestAug suite: ``<suite>-gpt`` + ``<suite>-expansion``, template-only baseline
    suite of ``baseline_nsamples`` cases per template, in the test-case schema; the
    repeated cases left out, as rejected rows: ``first_of_each_case``).
    ``valid``: the judged cases (``VALIDITY_SCHEMA``), ``expanded``: the expansion's cases."""
    by_key = {d.key: d for d in descs}
    rows = []
    for r in valid.to_pylist():
        if not r["kept"]:
            continue
        d = by_key[r["key"]]
        filtered = r["decided_by"] in ("people", "classifier", "llm labeler")
        rows.append(
            _case(
                f"{suite}-gpt",
                d,
                r["text"],
                r["text_pair"],
                "testaug_generate",
                generator,
                seed,
                {"prompt": r["prompt"], "validity": r["decided_by"], "valid_p": r["valid_p"]},
                checks=list(r.get("checks") or []) + ([f"validity ({r['decided_by']})"] if filtered else []),
            )
        )
    for r in expanded.to_pylist():
        d = by_key[r["key"]]
        rows.append(
            _case(
                f"{suite}-expansion",
                d,
                r["text"],
                r["text_pair"],
                r["template_id"],
                "testaug-expansion",
                seed,
                {"template": json.loads(r["template"]), "source": r["source"], "fillings": json.loads(r["filling"])},
                checks=list(r.get("checks") or []),
            )
        )
    base = expand([x for d in descs for x in d.templates], suite="checklist", nsamples=baseline_nsamples, seed=seed)
    desc_of = {x.template_id: d for d in descs for x in d.templates}
    base_rows = [
        {
            **r,
            "topic": desc_of[r["provenance"]["template_id"]].description,
            "meta": {**json.loads(r["meta"]), "description_key": desc_of[r["provenance"]["template_id"]].key},
        }
        for r in base.cases.to_pylist()
    ]
    unique, repeats = first_of_each_case(rows)
    return make_cases(unique), make_cases(base_rows), repeats


def first_of_each_case(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rows, repeats): a case two descriptions produced alike (same suite, text, pair and
    label, so one case id: "I thought the weather would be rainy, but it wasn't." under two
    "I thought ..." descriptions) stays once, under the first; the repeats are returned as
    ``rejected.parquet`` rows (check ``duplicate``)."""
    first: dict[str, str] = {}
    unique, repeats = [], []
    for r in rows:
        cid = case_id(r["suite"], r["text"], r["text_pair"], r["expected_label"])
        if cid not in first:
            first[cid] = r["meta"]["description_key"]
            unique.append(r)
            continue
        repeats.append(
            {
                "suite": r["suite"],
                "capability": r["capability"],
                "text": r["text"],
                "text_pair": r["text_pair"],
                "expected_label": r["expected_label"],
                "check": "duplicate",
                "reason": f"the same case as one of description {first[cid]}",
                "meta": {"description": r["meta"]["description_key"]},
            }
        )
    return unique, repeats


def _case(
    suite: str,
    d: Description,
    text: str,
    pair: str | None,
    template_id: str,
    generator: str,
    seed: int,
    meta: dict,
    checks: list[str] | None = None,
) -> dict:
    return {
        "checks": checks,
        "suite": suite,
        "method": METHOD,
        "capability": d.capability,
        "topic": d.description,
        "text": text,
        "text_pair": pair,
        "expected_label": d.label,
        "test_type": "MFT",
        "provenance": {"source_id": None, "template_id": template_id, "generator": generator, "seed": seed},
        "meta": {"description": d.description, "description_key": d.key, **meta},
    }


ANNOTATION_SCHEMA = pa.schema(
    [
        ("description", pa.string()),
        ("capability", pa.string()),
        ("label", pa.string()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("validity", pa.int64()),
        ("llm_validity", pa.int64()),
    ]
)


def annotation_sheet(valid: pa.Table, descs: list[Description]) -> pa.Table:
    """Each description's phase-1 sample; ``validity`` is people's label when known, else
    null for an annotator to fill (the LLM's verdict is shown as ``llm_validity``)."""
    by_key = {d.key: d for d in descs}
    rows = [
        {
            "description": by_key[r["key"]].description,
            "capability": by_key[r["key"]].capability,
            "label": by_key[r["key"]].label,
            "text": r["text"],
            "text_pair": r["text_pair"],
            "validity": r["valid_people"],
            "llm_validity": r["valid_llm"],
        }
        for r in valid.to_pylist()
        if r["first_sample"]
    ]
    return pa.Table.from_pylist(rows, schema=ANNOTATION_SCHEMA)


def rejected_rows(
    parsed: pa.Table, judged: pa.Table, expanded: pa.Table, descs: list[Description], suite: str
) -> pa.Table:
    """``rejected.parquet``: every candidate the automatic checks rejected (the parse and
    top-up stages' ``rejected``, the expansion's) and every generated case the validity
    filter did not keep (check ``validity``, its judge as reason)."""
    from checkray.engine.case_checks import rejected_table

    by_key = {d.key: d for d in descs}
    filtered = [
        {
            "suite": f"{suite}-gpt",
            "capability": by_key[r["key"]].capability,
            "text": r["text"],
            "text_pair": r["text_pair"],
            "expected_label": by_key[r["key"]].label,
            "check": "validity",
            "reason": f"judged invalid by the {r['decided_by']}",
            "meta": {"description": r["key"], "prompt": r["prompt"]},
        }
        for r in judged.to_pylist()
        if not r["kept"]
    ]
    return pa.concat_tables([parsed, rejected_table(filtered), expanded])
