"""Contrast triples given as input, scored without the mutation step.

Two shapes are read:

* a released-triples JSON, the COSTELLO authors' format: ``{relation: [[seed, closer,
  farther], ...], ...}``. Relations are mapped to CRs by name: the authors'
  ``SenWordFuzz`` (CR1), ``swapGender_sentiSynonymSubstitution`` (CR2), ``synon_contr``
  (CR3), or ``CR1``-``CR4`` themselves; any other name is an error naming it. A CR4
  sentence pair is one string ``"a [SEP] b"`` (the authors' MRPC encoding).
* a suite Parquet in checkray's test-case schema (``triples.parquet`` of an earlier
  ``costello`` run, or any suite laid out as seed / closer / farther rows joined by
  ``meta.triple``).

Either way the result is a cases table in the ``costello`` layout
(``checkray.engine.costello.triples.triples_to_cases``), its ``suite`` the name given.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from checkray.engine.costello.mutations import Variant
from checkray.engine.costello.triples import CAPABILITIES, METHOD, Seed, Triple, triple_table, triples_to_cases
from checkray.engine.errors import InputError
from checkray.engine.schema import case_id

RELATION_ALIASES = {
    "SenWordFuzz": "CR1",
    "swapGender_sentiSynonymSubstitution": "CR2",
    "synon_contr": "CR3",
    **{cr: cr for cr in CAPABILITIES},
}
PAIR_SEPARATOR = " [SEP] "


def _split(text: str, cr: str) -> tuple[str, str | None]:
    if cr == "CR4" and PAIR_SEPARATOR in text:
        a, b = text.split(PAIR_SEPARATOR, 1)
        return a, b
    return text, None


def triples_from_json(path: Path, suite: str) -> list[Triple]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a JSON file ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a JSON object of relation -> [[seed, closer, farther], ...]")
    out: list[Triple] = []
    for relation, items in data.items():
        cr = RELATION_ALIASES.get(relation)
        if cr is None:
            raise InputError(f"{path}: unknown relation '{relation}' (have: {', '.join(sorted(RELATION_ALIASES))})")
        if not isinstance(items, list):
            raise InputError(f"{path}: {relation}: expected a list of [seed, closer, farther]")
        for n, item in enumerate(items):
            if not (
                isinstance(item, list) and len(item) >= 3 and all(isinstance(t, str) and t.strip() for t in item[:3])
            ):
                raise InputError(f"{path}: {relation}[{n}]: expected [seed, closer, farther] non-empty strings")
            (s, s_pair), (p, p_pair), (q, q_pair) = (_split(t.strip(), cr) for t in item[:3])
            seed = Seed(f"{suite}-{relation}-{n}", s, None, s_pair)
            tid = case_id(METHOD, suite, relation, str(n), s, p, q)
            out.append(Triple(tid, cr, seed, Variant("given", p, p_pair), Variant("given", q, q_pair), suite=suite))
    if not out:
        raise InputError(f"{path}: no triples")
    return out


def triples_from_parquet(path: Path, suite: str) -> list[Triple]:
    try:
        cases = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: unreadable Parquet ({str(exc).splitlines()[0]})") from None
    need = {"capability", "text", "text_pair", "meta", "expected_label"}
    if not need <= set(cases.column_names):
        raise InputError(f"{path}: not a test-case suite (missing {', '.join(sorted(need - set(cases.column_names)))})")
    try:
        wide = triple_table(cases)
    except (KeyError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: rows are not seed/closer/farther triples joined by meta.triple ({exc})") from None
    out = []
    for r in wide.to_pylist():
        if r["capability"] not in CAPABILITIES:
            raise InputError(f"{path}: capability '{r['capability']}' is not one of {', '.join(CAPABILITIES)}")
        seed = Seed(f"{suite}-{r['triple']}", r["seed"], r["label"], r["seed_pair"])
        out.append(
            Triple(
                case_id(METHOD, suite, r["triple"]),
                r["capability"],
                seed,
                Variant(r["positive_op"] or "given", r["positive"], r["positive_pair"]),
                Variant(r["negative_op"] or "given", r["negative"], r["negative_pair"]),
                suite=suite,
            )
        )
    if not out:
        raise InputError(f"{path}: no triples")
    return out


def read_triples(path: str, suite: str | None = None) -> pa.Table:
    """A given suite as a costello cases table (suite: the file's stem by default)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: triples file not found")
    name = suite or p.stem
    suffix = p.suffix.lower()
    if suffix == ".json":
        triples = triples_from_json(p, name)
    elif suffix in (".parquet", ".pq"):
        triples = triples_from_parquet(p, name)
    else:
        raise InputError(f"{p}: triples must be a .json (relation -> triples) or a suite .parquet")
    return triples_to_cases(triples, name)
