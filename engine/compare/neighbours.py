"""Template neighbours of a failing case (pure): the same template with one slot filled
differently, so a model is taught the capability rather than one sentence.

Only cases a template made can have neighbours: their ``provenance.template_id`` and the
``meta`` keys ``template`` (the template text, or [text, text_pair]) and ``fillings`` (the
slot values), as ``checkray.engine.templates.expand`` writes them. The values a slot may take are
the template's pools when its spec is given (``pools``), else the values that slot took
in the suite's other cases of the same template (what the case data holds). A neighbour
keeps the case's label, capability and test type; a text that is already a case of the
suite is never produced (so held-out cases are not copied into training data).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from checkray.engine.schema import case_id
from checkray.engine.templates.expand import Slot, parse_template, render, template_seed

GENERATOR = "checkray-export-failures"


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def template_info(meta: str | None, provenance: Mapping | None) -> tuple[str, Any, dict] | None:
    """(template_id, template text(s), fillings) of a template-made case, else None."""
    if not meta or not provenance or not provenance.get("template_id"):
        return None
    try:
        data = json.loads(meta)
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or "template" not in data or not isinstance(data.get("fillings"), dict):
        return None
    return provenance["template_id"], data["template"], data["fillings"]


def observed_pools(cases: pa.Table) -> dict[str, dict[str, list[Any]]]:
    """Per template id, per slot: the distinct values the suite's cases of it used."""
    pools: dict[str, dict[str, dict[str, Any]]] = {}
    for meta, prov in zip(cases.column("meta").to_pylist(), cases.column("provenance").to_pylist()):
        info = template_info(meta, prov)
        if info is None:
            continue
        tid, _, fillings = info
        slots = pools.setdefault(tid, {})
        for slot, value in fillings.items():
            slots.setdefault(slot, {}).setdefault(_key(value), value)
    return {tid: {slot: list(vals.values()) for slot, vals in slots.items()} for tid, slots in pools.items()}


def _siblings(keys: Iterable[str]) -> list[list[str]]:
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(re.sub(r"\d+$", "", key), []).append(key)
    return [g for g in groups.values() if len(g) > 1]


def neighbours(
    row: Mapping[str, Any],
    pools: Mapping[str, Mapping[str, list[Any]]],
    taken: set[tuple[str, str | None]],
    limit: int,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Up to ``limit`` neighbours of one case (a dict of TEST_CASE_SCHEMA fields), chosen by
    a generator seeded by (seed, case id); ``taken`` holds the (text, text_pair) pairs that
    exist already and receives the new ones."""
    info = template_info(row.get("meta"), row.get("provenance"))
    if info is None or limit <= 0 or row.get("test_type") != "MFT":
        return []
    tid, template, fillings = info
    texts = [template] if isinstance(template, str) else list(template)
    try:
        parts = [parse_template(t) for t in texts]
    except Exception:  # noqa: BLE001 - a template checkray cannot parse has no neighbours
        return []
    keys = {p.key for ps in parts for p in ps if isinstance(p, Slot)}
    if not keys <= set(fillings):
        return []
    siblings = _siblings(fillings)
    options = []
    for slot in sorted(keys):
        for value in pools.get(tid, {}).get(slot, []):
            if _key(value) == _key(fillings[slot]):
                continue
            filling = {**fillings, slot: value}
            if any(len({_key(filling[k]) for k in group}) < len(group) for group in siblings):
                continue
            try:
                rendered = tuple(render(p, filling) for p in parts)
            except (KeyError, IndexError, TypeError):
                continue
            options.append((slot, filling, rendered))
    rng = random.Random(template_seed(seed, str(row["case_id"])))
    rng.shuffle(options)
    out = []
    meta = json.loads(row["meta"])
    for slot, filling, rendered in options:
        text, pair = rendered[0], rendered[1] if len(rendered) > 1 else None
        if (text, pair) in taken:
            continue
        taken.add((text, pair))
        prov = dict(row["provenance"])
        prov.update({"generator": GENERATOR, "seed": seed})
        out.append(
            {
                **{k: row.get(k) for k in ("suite", "method", "capability", "topic", "expected_label", "test_type")},
                "expected_labels": row.get("expected_labels"),
                "case_id": case_id(row["suite"], text, pair, row.get("expected_label"), "neighbour"),
                "text": text,
                "text_pair": pair,
                "provenance": prov,
                "meta": json.dumps(
                    {**meta, "fillings": filling, "neighbour_of": row["case_id"], "changed_slot": slot},
                    sort_keys=True,
                    ensure_ascii=False,
                ),
            }
        )
        if len(out) >= limit:
            break
    return out
