"""CheckList-style template suites: capability specs (data) expanded into MFT test cases.

A spec is JSONL (one record per line) or YAML (a list of records, or ``{templates: [...]}``)
in the format of CheckList/TestAug template dumps::

    {"capability": "Negation", "label": 0, "description": "...",
     "template": "I {neg} {a:pos_adj} {air_noun}.",      # or [text, text_pair]
     "pool": {"neg": ["don't want", "can't say it's"], "air_noun": "@city", ...}}

Slot syntax (as CheckList's ``editor.template``), see ``docs/templates.md``:

* ``{slot}`` a filler from ``pool[slot]``; ``{a:slot}``/``{A:slot}`` the filler with its
  indefinite article ("an hour", "A university");
* one slot name used twice in a record (also across the two texts of a pair) takes the
  same filler; ``{slot1}``/``{slot2}`` draw independently from ``pool[slot]`` (unless the
  pool has its own ``slot1`` key) and never take the same filler;
* ``{slot[0]}`` / ``{slot.name}`` index list / object fillers (paired pools such as
  ``[["buy", "bought"], ...]``); ``{{``/``}}`` are literal braces;
* a pool value ``"@name"`` is a built-in lexicon (``checkray.engine.lang.lexicons``).

Expansion samples ``nsamples`` fillings per template without replacement from the
cartesian product of its slots, by drawing product *indices* (the product is never
materialized) from a generator seeded by (seed, template id), so adding a template never
changes another template's cases. Identical cases are dropped.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml
from pydantic import ConfigDict, StrictInt, StrictStr, ValidationError

from checkray.engine.config import repo_path
from checkray.engine.errors import InputError
from checkray.engine.lang.lexicons import is_reference, resolve_lexicon, with_article
from checkray.engine.schema import TestType, make_cases
from checkray.engine.strict import StrictInput, load_yaml

METHOD = "template"
GENERATOR = "checklist-template"
SENTIMENT_LABELS = {"0": "negative", "1": "positive", "2": "neutral"}
PAIR_LABELS = {"0": "not_duplicate", "1": "duplicate"}  # QQP's is_duplicate

# ------------------------------------------------------------------ template parsing

_TOKEN = re.compile(r"\{\{|\}\}|\{[^{}]*\}|[{}]")
_SLOT = re.compile(r"^(?:(a|an|A|An):)?([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\]|\.[A-Za-z_][A-Za-z0-9_]*)*)$")
_ACCESSOR = re.compile(r"\[(\d+)\]|\.([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Slot:
    key: str  # the slot's identity: same key, same filler
    article: str | None = None  # None, "a" or "A"
    accessors: tuple[int | str, ...] = ()  # list indices and object attributes

    def fill(self, value: Any) -> str:
        for step in self.accessors:
            value = value[step]
        text = str(value)
        return with_article(text, capital=self.article == "A") if self.article else text


Part = str | Slot


def parse_template(text: str) -> list[Part]:
    """Literal strings and slots of one template text; malformed braces are errors."""
    parts: list[Part] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() > pos:
            parts.append(text[pos : m.start()])
        token = m.group()
        if token in ("{{", "}}"):
            parts.append(token[0])
        elif token in ("{", "}"):
            raise InputError(f"unbalanced '{token}' at character {m.start() + 1} of template {text!r}")
        else:
            slot = _SLOT.match(token[1:-1].strip())
            if not slot:
                raise InputError(
                    f"bad slot {token} in template {text!r} (expected {{name}}, {{a:name}} or {{name[0]}})"
                )
            article, key, access = slot.groups()
            steps = tuple(int(i) if i else a for i, a in _ACCESSOR.findall(access))
            parts.append(Slot(key, None if article is None else article[0], steps))
        pos = m.end()
    if pos < len(text):
        parts.append(text[pos:])
    return parts


def render(parts: Sequence[Part], filling: Mapping[str, Any]) -> str:
    return "".join(p if isinstance(p, str) else p.fill(filling[p.key]) for p in parts)


# -------------------------------------------------------------------- spec reading


class TemplateRecord(StrictInput):
    """One record of a spec file (the CheckList/TestAug dump format)."""

    model_config = ConfigDict(extra="forbid")

    template: StrictStr | list[StrictStr]
    label: StrictInt | StrictStr
    capability: StrictStr
    pool: dict[str, Any] = {}
    description: StrictStr | None = None
    original_description: StrictStr | None = None


@dataclass
class Template:
    """A parsed, validated template ready to expand."""

    template_id: str
    where: str  # "file:line N" for error messages and provenance
    capability: str
    label: str
    texts: list[list[Part]]  # one text, or [text, text_pair]
    slot_keys: list[str]  # product dimensions, in order of first appearance
    values: dict[str, list[Any]]  # slot key -> its pool (deduplicated)
    siblings: list[list[str]]  # slot keys drawn from one pool: fillers must differ
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def combinations(self) -> int:
        return math.prod(len(self.values[k]) for k in self.slot_keys)


def template_id(record: TemplateRecord) -> str:
    """Stable id: the same record (template, pool, label, capability) gets the same id."""
    blob = json.dumps(
        record.model_dump(include={"template", "pool", "label", "capability"}), sort_keys=True, ensure_ascii=False
    )
    return "tpl-" + hashlib.sha1(blob.encode("utf-8")).hexdigest()[:12]


def _pool_values(name: str, raw: Any, where: str) -> list[Any]:
    values = resolve_lexicon(raw) if is_reference(raw) else raw
    if isinstance(values, (str, int, float)) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, list):
        raise InputError(f"{where}: pool '{name}' must be a list or an '@lexicon' name, got {type(values).__name__}")
    if not values:
        raise InputError(f"{where}: pool '{name}' is empty")
    unique: dict[str, Any] = {}
    for v in values:  # duplicates would only produce duplicate cases
        unique.setdefault(json.dumps(v, sort_keys=True), v)
    return list(unique.values())


def _check_accessors(slot: Slot, values: list[Any], where: str) -> None:
    """Fail before sampling if some filler cannot be indexed as the slot asks."""
    shown = (
        "{"
        + (f"{slot.article}:" if slot.article else "")
        + slot.key
        + "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in slot.accessors)
        + "}"
    )
    for value in values:
        try:
            for step in slot.accessors:
                if isinstance(step, int) and not isinstance(value, list):
                    raise TypeError
                if isinstance(step, str) and not isinstance(value, dict):
                    raise TypeError
                value = value[step]
        except (TypeError, IndexError, KeyError):
            raise InputError(f"{where}: slot {shown} does not fit pool value {json.dumps(value)}") from None
        if isinstance(value, (list, dict)):
            raise InputError(
                f"{where}: slot {shown} fills a {type(value).__name__} value; index it like {{{slot.key}[0]}}"
            )
        if value is None or (slot.article and not str(value).strip()):  # "" is a fine filler alone
            raise InputError(f"{where}: slot {shown} has an empty filler")


def build_template(
    record: TemplateRecord, where: str, label_map: Mapping[str, str] | None, source: str | None = None
) -> Template:
    """Validate one record; ``where`` names it in errors, ``source`` in the cases' meta."""
    raw_texts = [record.template] if isinstance(record.template, str) else list(record.template)
    if len(raw_texts) not in (1, 2):
        raise InputError(
            f"{where}: 'template' must be a string or a [text, text_pair] list, got {len(raw_texts)} texts"
        )
    try:
        texts = [parse_template(t) for t in raw_texts]
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    is_pair = len(texts) == 2
    if isinstance(record.label, int):
        labels = label_map if label_map is not None else (PAIR_LABELS if is_pair else SENTIMENT_LABELS)
        if str(record.label) not in labels:
            raise InputError(f"{where}: label {record.label} is not in the label map {dict(labels)}")
        label = labels[str(record.label)]
    else:
        label = record.label

    pools = {name: _pool_values(name, raw, where) for name, raw in record.pool.items()}
    slots = [p for parts in texts for p in parts if isinstance(p, Slot)]
    keys = list(dict.fromkeys(s.key for s in slots))
    values: dict[str, list[Any]] = {}
    pool_of: dict[str, str] = {}
    for key in keys:
        base = key if key in pools else re.sub(r"\d+$", "", key)
        if base not in pools:
            raise InputError(f"{where}: slot '{key}' is not in the pool (pool has: {', '.join(pools) or 'nothing'})")
        values[key] = pools[base]
        pool_of[key] = base
    for s in slots:
        _check_accessors(s, values[s.key], where)
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(pool_of[key], []).append(key)
    meta = {
        "description": record.description,
        "original_description": record.original_description,
        "template": record.template,
        "spec": source or where,
    }
    return Template(
        template_id(record),
        where,
        record.capability,
        label,
        texts,
        keys,
        values,
        [g for g in groups.values() if len(g) > 1],
        {k: v for k, v in meta.items() if v is not None},
    )


def _load_records(path: Path) -> list[tuple[str, Any]]:
    """(where, raw record) pairs from a JSONL or YAML spec."""
    if not path.is_file():
        raise InputError(f"{path}: spec file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: spec file is not UTF-8 text") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            data = load_yaml(text)  # duplicate keys refused
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1}" if mark else ""
            raise InputError(f"{path}: bad YAML{at}: {getattr(exc, 'problem', exc)}") from None
        if isinstance(data, dict) and set(data) == {"templates"}:
            data = data["templates"]
        if data is None:
            data = []
        if not isinstance(data, list):
            raise InputError(f"{path}: a YAML spec is a list of templates or {{templates: [...]}}")
        return [(f"{path}: template {i}", rec) for i, rec in enumerate(data, 1)]
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: bad JSON line: {exc.msg} (column {exc.colno})") from None
    return records


def read_spec(path: str | Path, label_map: Mapping[str, str] | None = None) -> list[Template]:
    """Parse and validate every template of a spec file; one-line errors name the line.

    ``label_map`` maps integer labels (as strings) to names; None uses the sentiment map
    for single texts and the QQP duplicate map for pairs. String labels pass through.
    """
    path = Path(repo_path(path))  # a relative spec: the working directory's, else the repository's
    templates = []
    for where, raw in _load_records(path):
        if not isinstance(raw, dict):
            raise InputError(f"{where}: a template record is a JSON object, got {type(raw).__name__}")
        try:
            record = TemplateRecord.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("str", "int", "list")))
            msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            raise InputError(f"{where}: {loc or 'record'}: {msg}") from None
        templates.append(build_template(record, where, label_map, source=where.replace(str(path), path.name, 1)))
    if not templates:
        raise InputError(f"{path}: spec has no templates")
    return templates


# ------------------------------------------------------------------------ expansion

SHUFFLE_LIMIT = 10_000  # products up to this size are shuffled whole; larger ones sampled by index


def product_indices(total: int, nsamples: int | None, rng: random.Random) -> Iterator[int]:
    """Distinct indices into a product of ``total`` combinations: all of them in order when
    ``nsamples`` is None, else a lazy random order that never materializes a big product."""
    if nsamples is None:
        yield from range(total)
    elif total <= max(4 * nsamples, SHUFFLE_LIMIT):
        order = list(range(total))
        rng.shuffle(order)
        yield from order
    else:  # total > 4 * nsamples: a fresh draw is new with probability > 3/4
        seen: set[int] = set()
        budget = 50 * nsamples + SHUFFLE_LIMIT  # stop if the template keeps failing (see docs)
        while budget and len(seen) < total:
            budget -= 1
            i = rng.randrange(total)
            if i not in seen:
                seen.add(i)
                yield i


def decode(index: int, template: Template) -> dict[str, Any]:
    """The filling at ``index`` of the mixed-radix product of the template's pools."""
    filling = {}
    for key in reversed(template.slot_keys):
        index, j = divmod(index, len(template.values[key]))
        filling[key] = template.values[key][j]
    return {k: filling[k] for k in template.slot_keys}


def template_seed(seed: int, tid: str) -> int:
    return int(hashlib.sha256(f"{seed}:{tid}".encode()).hexdigest()[:16], 16)


def expand_template(
    template: Template, nsamples: int | None, seed: int, max_combinations: int
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Up to ``nsamples`` (None: all) distinct (texts, filling) of one template."""
    nsamples = nsamples or None
    total = template.combinations
    if nsamples is None and total > max_combinations:
        raise InputError(
            f"{template.where}: {total:,} combinations exceed max_combinations "
            f"({max_combinations:,}); sample them with nsamples > 0"
        )
    rng = random.Random(template_seed(seed, template.template_id))
    seen: set[tuple[str, ...]] = set()
    for index in product_indices(total, nsamples, rng):
        filling = decode(index, template)
        if any(
            len({json.dumps(filling[k], sort_keys=True) for k in group}) < len(group) for group in template.siblings
        ):
            continue  # {name1} and {name2} must be different names
        texts = tuple(render(parts, filling) for parts in template.texts)
        if texts in seen:
            continue
        seen.add(texts)
        yield texts, filling
        if nsamples is not None and len(seen) >= nsamples:
            return


@dataclass
class Expansion:
    cases: pa.Table
    per_capability: dict[str, int]
    templates: int
    duplicates: int  # cases dropped because an earlier template produced the same case
    short: list[str]  # templates that produced fewer than nsamples cases


def expand(
    templates: Sequence[Template],
    suite: str,
    nsamples: int | None = 100,
    seed: int = 0,
    max_combinations: int = 100_000,
) -> Expansion:
    """Expand templates into a validated test-case table (TEST_CASE_SCHEMA).

    ``nsamples`` cases per template (0 or None: every combination, up to ``max_combinations``).
    """
    nsamples = nsamples or None
    rows: dict[tuple, dict[str, Any]] = {}
    duplicates = 0
    short = []
    for t in templates:
        produced = 0
        for texts, filling in expand_template(t, nsamples, seed, max_combinations):
            produced += 1
            key = (texts, t.label)
            if key in rows:  # the same case from another template (or a repeated record)
                duplicates += 1
                continue
            rows[key] = {
                "suite": suite,
                "method": METHOD,
                "capability": t.capability,
                "text": texts[0],
                "text_pair": texts[1] if len(texts) > 1 else None,
                "expected_label": t.label,
                "test_type": TestType.MFT,
                "provenance": {"source_id": None, "template_id": t.template_id, "generator": GENERATOR, "seed": seed},
                "meta": {**t.meta, "fillings": filling},
            }
        if nsamples is not None and produced < min(nsamples, t.combinations):
            short.append(t.where)
    table = make_cases(rows.values())
    return Expansion(table, dict(Counter(table.column("capability").to_pylist())), len(templates), duplicates, short)
