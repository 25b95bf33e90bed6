"""TestAug template expansion (§4.3): generated cases become new templates.

A content word (spaCy NOUN, VERB, ADJ; PROPN counts as a noun, so names can be slots) of
a generated case that equals what a slot of one of its seed cases was filled with becomes
that slot again: seed "No one appreciates that airline." from "No one {pos_verb} {the}
{air_noun}." and generated "No one appreciates that air traffic controller." give
"No one {pos_verb} that air traffic controller." ("that" reappears too, but a determiner
is not a content word). ``match="pool"`` also slots words that are any filler of the
seed's slot, as the paper's Table 12 examples do. An article before a slotted word
becomes ``{a:slot}``. A slot that replaced a noun keeps only the fillers of the same kind
of noun (WordNet's lexicographer file of the first sense: a person, an artifact, a group;
``same_kind_pool``). The new templates are expanded with those pools by
``checkray.engine.templates.expand``.

Pairs: a slot is kept when its word is found in both texts, or when the seed template
uses that slot in one text only (otherwise filling it would break the pair's relation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import pyarrow as pa

from checkray.engine.case_checks import apply_checks, rejected_table
from checkray.engine.errors import InputError
from checkray.engine.lm_fluency import CHECK, LMFluencyCheck, sentence_drop, texts_of
from checkray.engine.templates.expand import Slot, Template, TemplateRecord, build_template, expand_template
from checkray.engine.testaug.checks import expansion_checks, with_description
from checkray.engine.testaug.prompt import Description, SeedCase, normalize, seed_keys, shown_seed

CONTENT_POS = {"NOUN", "PROPN", "VERB", "ADJ"}
MAX_SPAN = 4  # words in one filler ("air traffic controller")


@dataclass
class SlotCandidate:
    token: str  # template text for the slot, e.g. "{air_noun}" or "{x[1]}"
    key: str
    article_token: str | None  # "{a:air_noun}" when the slot can take an article
    pool: list[Any]
    texts_using: int  # how many texts of the seed template use the slot (1 or 2)


def _slot_text(slot: Slot, *, article: bool = False) -> str:
    access = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in slot.accessors)
    return "{" + ("a:" if article else "") + slot.key + access + "}"


def seed_candidates(
    seeds: Sequence[SeedCase], templates: dict[str, Template], match: str = "filling"
) -> dict[str, SlotCandidate]:
    """Lower-cased filler text -> the slot it fills, over the seeds (first seed wins)."""
    out: dict[str, SlotCandidate] = {}
    for seed in seeds:
        t = templates[seed.template_id]
        for parts in t.texts:
            for p in parts:
                if not isinstance(p, Slot):
                    continue
                bare = Slot(p.key, None, p.accessors)
                uses = sum(any(isinstance(q, Slot) and q.key == p.key for q in ps) for ps in t.texts)
                values = t.values[p.key] if match == "pool" else [seed.filling[p.key]]
                cand = SlotCandidate(_slot_text(bare), p.key, _slot_text(bare, article=True), t.values[p.key], uses)
                for v in values:
                    try:
                        text = bare.fill(v).strip().lower()
                    except (KeyError, IndexError, TypeError):
                        continue
                    if text and len(text.split()) <= MAX_SPAN:
                        out.setdefault(text, cand)
    return out


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _numbered(cand: SlotCandidate, word: str, words: list[str]) -> tuple[str, str]:
    """(slot, slot with article) for ``word``: the same word, the same slot; another word
    of the same slot becomes ``{slot2}``, ``{slot3}``... (drawn apart from ``{slot}``), as
    in "The {noun} is not good. The {noun2} is not good." Indexed slots keep one name."""
    if word not in words:
        words.append(word)
    n = words.index(word) + 1
    if n == 1 or cand.token != "{" + cand.key + "}" or cand.key[-1].isdigit():
        return cand.token, cand.article_token
    return "{" + f"{cand.key}{n}" + "}", "{a:" + f"{cand.key}{n}" + "}"


@lru_cache(maxsize=4096)  # a slot's pool is read again for every case that fills it
def noun_kind(word: str) -> str | None:
    """The WordNet lexicographer file of the first noun sense of ``word``'s last word
    (noun.person, noun.artifact, noun.group, ...), or None when WordNet has no noun for it."""
    from checkray.engine.lang.wordnet import wordnet

    synsets = wordnet().synsets(word.split()[-1].lower(), pos="n") if word.strip() else []
    return synsets[0].lexname() if synsets else None


def same_kind_pool(cand: SlotCandidate, head) -> SlotCandidate:
    """``cand`` with its pool cut to the fillers of the kind of noun the slot replaced
    (``head``: the replaced span's last spaCy token), so a slot that held a person is filled
    with persons only: read at size, "The pilot was unhappy." expanded to "The airline was
    unhappy.", "We despised the seat's behavior." A replaced word that is no noun, or that
    WordNet lacks, and a filler WordNet lacks keep every filler."""
    if head.pos_ not in ("NOUN", "PROPN"):
        return cand
    kind = noun_kind(head.lemma_ or head.text)
    if kind is None:
        return cand
    pool = [f for f in cand.pool if not isinstance(f, str) or noun_kind(f) in (kind, None)]
    return replace(cand, pool=pool)


def templatize(doc, candidates: dict[str, SlotCandidate]) -> tuple[str, dict[str, SlotCandidate]]:
    """(template text, slots used) for one parsed text; the text itself if nothing matched."""
    out: list[str] = []
    used: dict[str, SlotCandidate] = {}
    words_of: dict[str, list[str]] = {}  # slot key -> the different words it replaced, in order
    i = 0
    tokens = list(doc)
    while i < len(tokens):
        hit = None
        for length in range(min(MAX_SPAN, len(tokens) - i), 0, -1):
            span = tokens[i : i + length]
            key = " ".join(t.text for t in span).lower()
            if key in candidates and all(t.pos_ in CONTENT_POS for t in span):
                hit = (length, candidates[key])
                break
        if hit is None:
            out.append(_escape(tokens[i].text_with_ws))
            i += 1
            continue
        length, cand = hit
        cand = same_kind_pool(cand, tokens[i + length - 1])
        if cand.key in used:  # a second word of the slot: the fillers of either place's kind
            first = used[cand.key].pool
            cand = replace(cand, pool=first + [f for f in cand.pool if f not in first])
        word = " ".join(t.lower_ for t in tokens[i : i + length])
        token, article_token = _numbered(cand, word, words_of.setdefault(cand.key, []))
        trailing = tokens[i + length - 1].whitespace_
        if out and tokens[i - 1].lower_ in ("a", "an") and tokens[i - 1].pos_ == "DET":
            article = tokens[i - 1].text_with_ws
            out[-1] = article_token.replace("{a:", "{A:", 1) if article[0].isupper() else article_token
        else:
            out.append(token)
        out.append(trailing)
        used[cand.key] = cand
        i += length
    return "".join(out).strip(), used


@dataclass
class NewTemplate:
    texts: list[str]  # one text, or [text, text_pair]
    slots: dict[str, SlotCandidate] = field(default_factory=dict)


def case_template(docs: Sequence, candidates: dict[str, SlotCandidate]) -> NewTemplate | None:
    """The new template of one generated case (``docs``: its parsed text(s)); None when no
    content word of it fills a seed slot."""
    parsed = [templatize(d, candidates) for d in docs]
    if len(parsed) == 2:
        keep = {
            k
            for k, c in {**parsed[0][1], **parsed[1][1]}.items()
            if (k in parsed[0][1] and k in parsed[1][1]) or c.texts_using == 1
        }
        if keep != set(parsed[0][1]) | set(parsed[1][1]):  # a slot on one side only: redo without it
            cands = {w: c for w, c in candidates.items() if c.key in keep}
            parsed = [templatize(d, cands) for d in docs]
    slots = {k: c for _, used in parsed for k, c in used.items()}
    if not slots:
        return None
    return NewTemplate([text for text, _ in parsed], slots)


def expand_new_template(
    new: NewTemplate, capability: str, label: str, description: str, nsamples: int, seed: int, where: str
) -> tuple[Template, list[tuple[tuple[str, ...], dict]]]:
    """Build the template with the seed pools and draw up to ``nsamples`` of its cases."""
    record = TemplateRecord(
        template=new.texts[0] if len(new.texts) == 1 else new.texts,
        label=label,
        capability=capability,
        description=description,
        pool={k: c.pool for k, c in new.slots.items()},
    )
    template = build_template(record, where, label_map=None)
    return template, list(expand_template(template, nsamples, seed, max_combinations=100_000))


# ------------------------------------------------------------------------ the expand stage

EXPANSION_SCHEMA = pa.schema(
    [(n, pa.string()) for n in ("key", "text", "text_pair", "template", "template_id", "source", "filling")]
    + [("checks", pa.list_(pa.string()))]  # the automatic checks it passed (engine/testaug/checks.py)
)
TEMPLATES_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("template", pa.string()),
        ("slots", pa.list_(pa.string())),
        ("template_id", pa.string()),
        ("source", pa.string()),
        ("cases", pa.int64()),
    ]
)


@dataclass(frozen=True)
class ExpansionSettings:
    """What the expansion reads of the ``testaug:`` section."""

    match: str = "filling"  # "filling": a seed's own slot filling; "pool": any filler of the slot
    per_template: int = 5  # cases kept from each new template
    max_per_description: int = 200  # new cases of one description in all
    candidates: int | None = None  # cases drawn from each new template (None: per_template)

    @property
    def drawn(self) -> int:
        return max(self.candidates or self.per_template, self.per_template)


@dataclass
class TemplateDraw:
    """One new template and its drawn cases that passed the rule checks, in draw order."""

    key: str
    texts: list[str]
    slots: list[str]
    template_id: str
    source: tuple[str, str | None]  # the kept case the template was made from
    candidates: list[dict]
    refused: list[dict]  # drawn cases the rule checks refused, with reasons


@dataclass
class Expansion:
    """New templates made from kept cases and their rule-checked draws; ``select`` keeps
    the first ``per_template`` of each that pass the LM fluency check too and gives the
    expand stage's ``data`` and ``templates`` tables (``EXPANSION_SCHEMA``,
    ``TEMPLATES_SCHEMA``) and ``rejected``."""

    draws: list[TemplateDraw] = field(default_factory=list)
    descriptions: dict[str, Description] = field(default_factory=dict)

    def texts_to_score(self) -> set[str]:
        """Every source text and candidate text the fluency check compares."""
        out: set[str] = set()
        for draw in self.draws:
            out.update(texts_of(*draw.source))
            for c in draw.candidates:
                out.update(texts_of(c["text"], c["text_pair"]))
        return out

    def select(
        self,
        settings: ExpansionSettings,
        check: LMFluencyCheck | None = None,
        scores: Mapping[str, float] | None = None,
    ) -> dict[str, pa.Table]:
        """The stage's tables: per template, its candidates in order until ``per_template``
        are kept (and ``max_per_description`` per description); with ``check``, a candidate
        whose text loses more than ``check.max_drop`` nats against its source is refused.
        A template met once a description is full is not used, its refusals not counted."""
        cases, templates, rejected = [], [], []
        produced: dict[str, int] = {}
        for draw in self.draws:
            done = produced.get(draw.key, 0)
            if done >= settings.max_per_description:
                continue
            fresh, refused = _kept_candidates(draw, settings, check, scores or {}, done)
            produced[draw.key] = done + len(fresh)
            rejected += with_description(draw.refused + refused, self.descriptions[draw.key], "testaug-expansion")
            templates.append(
                {
                    "key": draw.key,
                    "template": json.dumps(draw.texts),
                    "slots": draw.slots,
                    "template_id": draw.template_id,
                    "source": draw.source[0],
                    "cases": len(fresh),
                }
            )
            cases += [_case_row(draw, c) for c in fresh]
        return {
            "data": pa.Table.from_pylist(cases, schema=EXPANSION_SCHEMA),
            "templates": pa.Table.from_pylist(templates, schema=TEMPLATES_SCHEMA),
            "rejected": rejected_table(rejected),
        }


def _kept_candidates(
    draw: TemplateDraw,
    settings: ExpansionSettings,
    check: LMFluencyCheck | None,
    scores: Mapping[str, float],
    produced: int,
) -> tuple[list[dict], list[dict]]:
    """(kept, refused by the fluency check) of one template's candidates, in draw order;
    candidates past the last one kept are never looked at, like cases never drawn."""
    kept, refused = [], []
    room = min(settings.per_template, settings.max_per_description - produced)
    for c in draw.candidates:
        if len(kept) >= room:
            break
        if check is None:
            kept.append(c)
            continue
        drop = sentence_drop(draw.source, (c["text"], c["text_pair"]), scores)
        if drop > check.max_drop:
            reason = (
                f"costs the sentence {drop:.1f} nats against its source under {check.model} (limit {check.max_drop:g})"
            )
            refused.append({**c, "check": CHECK, "reason": reason})
        else:
            kept.append({**c, "checks": [*c["checks"], CHECK]})
    return kept, refused


def _case_row(draw: TemplateDraw, c: Mapping[str, Any]) -> dict:
    return {
        "key": draw.key,
        "text": c["text"],
        "text_pair": c["text_pair"],
        "template": json.dumps(draw.texts),
        "template_id": draw.template_id,
        "source": draw.source[0],
        "filling": json.dumps(c["filling"]),
        "checks": c["checks"],
    }


def expand_description(
    d: Description,
    kept: Sequence[Mapping[str, Any]],
    nlp,
    settings: ExpansionSettings,
    seed: int,
    seen: set[tuple],
    out: Expansion,
) -> None:
    """§4.3 for one description: each kept case (``key``, ``text``, ``text_pair``,
    ``seeds``: the seeds its prompt showed) whose content words fill its seeds' slots
    becomes a new template, expanded with the seed pools; ``settings.drawn`` cases of each
    are drawn and rule-checked, only sentences not in ``seen`` (updated). ``nlp``: spaCy."""
    templates = {x.template_id: x for x in d.templates}
    made = []
    out.descriptions[d.key] = d
    for r in kept:
        shown = [shown_seed(s) for s in json.loads(r["seeds"])]
        docs = [nlp(x) for x in (r["text"], r["text_pair"]) if x is not None]
        new = case_template(docs, seed_candidates(shown, templates, settings.match))
        if new is None or new.texts in made:
            continue  # a template met before draws the same cases again
        made.append(new.texts)
        try:
            template, drawn = expand_new_template(
                new, d.capability, d.label, d.description, settings.drawn, seed, f"{d.key}: {r['text']}"
            )
        except InputError:  # e.g. {a:slot} over a pool with an empty filler: not a usable template
            continue
        outcome = apply_checks(
            [
                {"text": x[0], "text_pair": x[1] if len(x) > 1 else None, "filling": f, "source": r["text"]}
                for x, f in drawn
            ],
            expansion_checks(d, seen),
        )
        source = (r["text"], r["text_pair"])
        out.draws.append(
            TemplateDraw(
                d.key, new.texts, sorted(new.slots), template.template_id, source, outcome.kept, outcome.rejected
            )
        )


def expand_cases(
    descs: Sequence[Description], kept: Sequence[Mapping[str, Any]], nlp, settings: ExpansionSettings, seed: int
) -> Expansion:
    """§4.3 over every description: new sentences only, never a seed case or a kept case;
    ``Expansion.select`` then keeps what reaches the suite."""
    out = Expansion()
    for d in descs:
        seen = seed_keys(d) | {(normalize(r["text"]), normalize(r["text_pair"] or "")) for r in kept}
        expand_description(d, [r for r in kept if r["key"] == d.key], nlp, settings, seed, seen, out)
    return out
