"""S²LCT seed search and transformation: pure functions over spaCy token dicts.

A sentence is a list of token dicts as ``actors/s2lct/parser.py`` emits them: ``t`` (text),
``ws`` (trailing whitespace), ``tag`` (Penn), ``pos`` (UPOS), ``lemma``, ``dep``,
``head``. Word classes cross the UPOS with the polarity of ``engine/lang/polarity.py``
(VADER+AFINN): a word the lexicons do not list is neutral.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from checkray.engine.case_checks import Check, apply_checks, row_check
from checkray.engine.lang.polarity import polarity_class
from checkray.engine.s2lct.confidence import LabelConfidence
from checkray.engine.s2lct.fluent import (
    back_reference_reason,
    comparison_reason,
    degree_reason,
    denial_reason,
    disputed_reason,
    exclusive_reason,
    fill_template,
    mixed_reason,
    open_quote_reason,
    polarity_reason,
    scope_reason,
    seed_form,
)
from checkray.engine.s2lct.spec import CapabilitySpec, FluentWrapper, SearchRule, Transform, WordClass
from checkray.engine.schema import case_id

Token = Mapping[str, Any]
NON_WORDS = {"PUNCT", "SPACE", "SYM", "X"}
FINAL_PUNCT = {".", "!", "?", "..."}
PROPER_TAGS = {"NNP", "NNPS"}
METHOD = "s2lct"
NEGATIONS = {"not", "n't", "never", "no", "nothing", "nobody", "none", "neither", "nor", "without", "nowhere"}


def words(tokens: Sequence[Token]) -> list[Token]:
    return [t for t in tokens if t["pos"] not in NON_WORDS]


def token_polarity(tok: Token) -> str:
    return polarity_class(tok["t"], tok.get("lemma"))


def has_class(tokens: Sequence[Token], wc: WordClass) -> bool:
    return any(t["pos"] in wc.pos and token_polarity(t) == wc.polarity for t in tokens)


def all_neutral(tokens: Sequence[Token]) -> bool:
    return all(token_polarity(t) == "neutral" for t in words(tokens))


def label_ok(
    rule: SearchRule,
    tokens: Sequence[Token],
    label: str | None,
    *,
    neutral_proxy: bool,
    neutral_label: str = "neutral",
) -> bool:
    """The corpus label equals the rule's; on a corpus without neutral labels
    (``neutral_proxy``), a sentence without any polar word counts as neutral."""
    if rule.label is None:
        return True
    if rule.label == neutral_label and neutral_proxy:
        return all_neutral(tokens)
    return label == rule.label


def matches(
    rule: SearchRule,
    tokens: Sequence[Token],
    label: str | None,
    *,
    neutral_proxy: bool = False,
    check_label: bool = True,
    neutral_label: str = "neutral",
) -> bool:
    """Does a sentence satisfy a search rule? (``check_label=False``: word conditions only,
    as when re-checking an expansion, which inherits its seed's label.)"""
    n = len(words(tokens))
    if n < rule.min_tokens or (rule.max_tokens is not None and n > rule.max_tokens):
        return False
    if rule.start:
        if len(tokens) < len(rule.start):
            return False
        for tok, alternatives in zip(tokens, rule.start):
            if tok["t"].lower() not in {a.lower() for a in alternatives}:
                return False
    if rule.exclude_words:
        banned = {w.lower() for w in rule.exclude_words}
        if any(t["t"].lower() in banned for t in tokens):
            return False
    if not all(has_class(tokens, wc) for wc in rule.include):
        return False
    if any(has_class(tokens, wc) for wc in rule.exclude):
        return False
    return not check_label or label_ok(rule, tokens, label, neutral_proxy=neutral_proxy, neutral_label=neutral_label)


def matching_rules(
    spec: CapabilitySpec,
    tokens: Sequence[Token],
    label: str | None,
    *,
    neutral_proxy: bool = False,
    neutral_label: str = "neutral",
) -> list[str]:
    return [
        r.name
        for r in spec.search
        if matches(r, tokens, label, neutral_proxy=neutral_proxy, neutral_label=neutral_label)
    ]


@dataclass(frozen=True)
class CorpusSearch:
    """The capabilities' search rules, run on every parsed corpus sentence (in the parser
    actors, where the tokens are); ``neutral_proxy``: the corpus has no neutral label, so a
    sentence without a polar word stands for one."""

    specs: tuple[CapabilitySpec, ...]
    neutral_proxy: bool = False
    neutral_label: str = "neutral"

    def matches(self, tokens: Sequence[Token], label: str | None) -> dict[str, list[str]]:
        """{capability id: the names of its rules the sentence satisfies} (capabilities with none left out)."""
        found = {}
        for spec in self.specs:
            rules = matching_rules(
                spec, tokens, label, neutral_proxy=self.neutral_proxy, neutral_label=self.neutral_label
            )
            if rules:
                found[spec.id] = rules
        return found


def detokenize(tokens: Sequence[Token]) -> str:
    return "".join(t["t"] + t["ws"] for t in tokens).strip()


def clause_text(tokens: Sequence[Token], *, embedded: bool) -> str:
    """The sentence as text; embedded in a template it loses its final punctuation and,
    unless it starts with a proper noun or "I", its capital."""
    toks = list(tokens)
    if embedded:
        while toks and toks[-1]["t"] in FINAL_PUNCT:
            toks = toks[:-1]
        if toks and toks[0]["tag"] not in PROPER_TAGS and toks[0]["t"] != "I":
            first = dict(toks[0])
            first["t"] = first["t"][:1].lower() + first["t"][1:]
            toks[0] = first
    return detokenize(toks)


def negate(tokens: Sequence[Token], mapping: Mapping[str, Sequence[str]], rng: random.Random) -> list[Token] | None:
    """Replace the first token whose lowercase form is a key by one of its replacements
    (keeping a leading capital); None when no token can be negated."""
    out = [dict(t) for t in tokens]
    for tok in out:
        options = mapping.get(tok["t"].lower())
        if options:
            new = rng.choice(list(options))
            tok["t"] = new[:1].upper() + new[1:] if tok["t"][:1].isupper() else new
            return out
    return None


def join_parts(parts: Iterable[str]) -> str:
    """Join template parts with spaces; a part starting with punctuation attaches left."""
    text = ""
    for part in parts:
        part = part.strip()
        if not part:
            continue
        text = part if not text else (text + part if re.match(r"[,.?!;:]", part) else f"{text} {part}")
    return text


def _sentence_pool(
    spec: CapabilitySpec, names: Sequence[str], found: Mapping[str, list[dict]], rng: random.Random
) -> list[tuple[str, dict]]:
    pool = [(name, s) for name in names for s in found.get(name, [])]
    rng.shuffle(pool)
    return pool


def seeds_from_transform(
    spec: CapabilitySpec,
    t_index: int,
    transform: Transform,
    found: Mapping[str, list[dict]],
    budget: int,
    rng: random.Random,
) -> list[dict]:
    """Up to ``budget`` seeds; every sentence part takes a distinct found sentence per seed."""
    pools = {i: _sentence_pool(spec, p.sentence, found, rng) for i, p in enumerate(transform.parts) if p.sentence}
    embedded = len(transform.parts) > 1
    seeds: list[dict] = []
    cursor = {i: 0 for i in pools}
    while len(seeds) < budget:
        texts, sources, rules = [], [], []
        core_at = None  # the first sentence part: what the expansion inserts into
        exhausted = False
        for i, part in enumerate(transform.parts):
            if part.choose is not None:
                texts.append(rng.choice(part.choose))
                continue
            while True:  # sentences that cannot be negated are skipped
                if cursor[i] >= len(pools[i]):
                    exhausted = True
                    break
                rule, sent = pools[i][cursor[i]]
                cursor[i] += 1
                tokens = sent["tokens"]
                if part.negate:
                    tokens = negate(tokens, part.negate, rng)
                    if tokens is None:
                        continue
                if core_at is None:
                    core_at = len(texts)
                texts.append(clause_text(tokens, embedded=embedded))
                sources.append(sent["id"])
                rules.append(rule)
                break
            if exhausted:
                break
        if exhausted:
            break
        wrapped = list(texts)
        wrapped[core_at] = "{s}"
        seeds.append(
            {
                "text": join_parts(texts),
                "core": texts[core_at],
                "wrap": join_parts(wrapped),
                "core_polarity": None,
                "label": transform.label,
                "sources": sources,
                "rules": rules,
                "template_id": f"{spec.id}.t{t_index}",
                "accepts": transform.accepts,
            }
        )
    return seeds


def build_seeds(spec: CapabilitySpec, found: Mapping[str, list[dict]], max_seeds: int, seed: int) -> list[dict]:
    """Seeds of one capability from the sentences each rule found (``found[rule] = [{id,
    text, tokens}]``): the found sentences themselves when the spec has no transforms,
    else the transforms' outputs, shared evenly among rules/transforms."""
    rng = random.Random(f"{seed}:{spec.id}")
    out: list[dict] = []
    if not spec.transforms:
        budget = math.ceil(max_seeds / len(spec.search))
        for rule in spec.search:
            pool = list(found.get(rule.name, []))
            rng.shuffle(pool)
            for sent in pool[:budget]:
                out.append(
                    {
                        "text": detokenize(sent["tokens"]),
                        "core": detokenize(sent["tokens"]),
                        "wrap": "{s}",
                        "core_polarity": rule.label,
                        "label": rule.label,
                        "sources": [sent["id"]],
                        "rules": [rule.name],
                        "template_id": f"{spec.id}.search.{rule.name}",
                        "accepts": [],
                    }
                )
    else:
        budget = math.ceil(max_seeds / len(spec.transforms))
        for i, transform in enumerate(spec.transforms):
            out.extend(seeds_from_transform(spec, i, transform, found, budget, rng))
    unique = {(s["text"], s["label"]): s for s in out}  # two draws may build the same text
    return list(unique.values())[:max_seeds]


def _candidate(spec: CapabilitySpec, rule: str, sent: dict) -> dict:
    text = detokenize(sent["tokens"])
    return {
        "id": sent["id"],
        "rule": rule,
        "label": spec.rule(rule).label,
        "tokens": sent["tokens"],
        "text": text,
        "capability": spec.name,
        "source": sent["id"],
    }


# A sentence that opens with one of these goes on from the one before it ("Or some damn
# thing ."): on its own it has no verdict a reader can check.
CONTINUING = frozenset({"and", "or", "nor", "but"})


def continuation_reason(tokens: Sequence[Token]) -> str | None:
    first = next((t for t in tokens if t["pos"] not in NON_WORDS), None)
    if first is not None and first["t"].lower() in CONTINUING:
        return f"opens with '{first['t']}': it goes on from a sentence before it"
    return None


def seed_checks(
    neutral_label: str,
    wrapper: FluentWrapper | None = None,
    corpus_polarity: Mapping[str, float] | None = None,
    confidence: LabelConfidence | None = None,
) -> list[Check]:
    """The checks a found sentence passes before it becomes a seed (``wrappers: fluent``):
    its form (one sentence; with a wrapper, a clause or noun phrase the wrapper has a
    template for) and its polarity (clear, or for a neutral rule neutral in every source)."""

    def form(row: dict) -> str | None:
        if wrapper is None:
            if sum(t["dep"] == "ROOT" for t in row["tokens"]) != 1:
                return "several sentences"
            return (
                continuation_reason(row["tokens"])
                or back_reference_reason(row["tokens"])
                or open_quote_reason(row["tokens"])
            )
        views, why = seed_form(row["tokens"], max_words=wrapper.max_words)
        if why:
            return why
        if wrapper.exclude_negated:
            negs = [t["t"] for t in row["tokens"] if t["t"].lower() in NEGATIONS]
            if negs:
                return f"negation '{negs[0]}' under a negating wrapper"
        usable = [f for f in wrapper.templates if f in views]
        if not usable:
            return f"a {'/'.join(sorted(views))} seed, but the wrapper has templates for {'/'.join(wrapper.templates)} only"
        row["form"], row["core"] = usable[0], views[usable[0]]
        return None

    def polarity(row: dict) -> str | None:
        if row["label"] is None:
            return None
        why = polarity_reason(
            row["tokens"], row["text"], row["label"], neutral_label=neutral_label, corpus_polarity=corpus_polarity
        )
        if why or row["label"] == neutral_label:
            return why
        if not row.get("core"):  # the found sentence is the seed
            return mixed_reason(row["text"], row["label"], corpus_polarity) or disputed_reason(
                row["text"], corpus_polarity
            )
        # What the wrapper embeds may be a part of the sentence ("somewhat clumsy", from a
        # review that goes on to praise): the case's label follows from that part, so it
        # must carry the sentence's polarity itself.
        # A mixed seed ("a smart, arch and rather cold-blooded comedy") leaves every
        # wrapper's label unclear: a denial, a change of mind, an author against critics.
        why = (
            polarity_reason(None, row["core"], row["label"])
            or mixed_reason(row["core"], row["label"], corpus_polarity)
            or disputed_reason(row["core"], corpus_polarity)
        )
        return f"the embedded {row['form']} '{row['core']}': {why}" if why else None

    def denied_whole(row: dict) -> str | None:
        # a noun phrase ("Would I call it {s}?") is denied whole
        why = denial_reason(row["tokens"], corpus_polarity) if row.get("form") in ("clause", "past") else None
        core = row.get("core") or row["text"]
        return (
            why
            or degree_reason(row["tokens"], core)
            or exclusive_reason(core)
            or scope_reason(core)
            or comparison_reason(row["tokens"], core)
        )

    checks = [
        row_check("seed-form", form, "one sentence; wrapped seeds: a clause or noun phrase the wrapper embeds"),
        row_check(
            "seed-polarity",
            polarity,
            "polar seeds: the sentence scores agree with the label, in the whole sentence and in the part a wrapper embeds, and no word has the opposite polarity; neutral: no polar word in any lexicon",
        ),
    ]
    if confidence is not None:
        checks.append(
            row_check(
                "seed-label-confidence",
                lambda row: None if row["label"] == neutral_label else confidence.reason(row["id"], row["label"]),
                f"polar seeds: a classifier cross-fitted on the corpus gives the sentence its label with p >= {confidence.threshold:g}",
            )
        )
    if wrapper is not None and wrapper.exclude_negated:  # the wrapper denies its seed
        checks.append(
            row_check(
                "seed-denied-whole",
                denied_whole,
                "under a denying wrapper: the clause's sentiment sits in its predicate, not in its subject, and is not the top of its scale, singled out by an exclusive word (only, sole, just), universal (always, every), both ... and, a comparison, a whole-span claim or an expectation (surprisingly)",
            )
        )
    return checks


def screen_found(
    spec: CapabilitySpec,
    found: Mapping[str, list[dict]],
    neutral_label: str,
    corpus_polarity: Mapping[str, float] | None = None,
    confidence: LabelConfidence | None = None,
) -> tuple[dict[str, list[dict]], list[dict], dict[str, list[str]]]:
    """The found sentences of a capability without fluent wrappers that pass the seed
    checks (rule -> sentences), the rejected ones with their reasons, and the checks
    each kept sentence passed (by id)."""
    kept: dict[str, list[dict]] = {}
    rejected: list[dict] = []
    passed: dict[str, list[str]] = {}
    checks = seed_checks(neutral_label, corpus_polarity=corpus_polarity, confidence=confidence)
    for rule, sents in found.items():
        out = apply_checks([_candidate(spec, rule, sd) for sd in sents], checks)
        rejected.extend(out.rejected)
        keep_ids = {r["id"] for r in out.kept}
        kept[rule] = [sd for sd in sents if sd["id"] in keep_ids]
        passed.update({r["id"]: r["checks"] for r in out.kept})
    return kept, rejected, passed


def fluent_seeds(
    spec: CapabilitySpec,
    found: Mapping[str, list[dict]],
    max_seeds: int,
    seed: int,
    neutral_label: str,
    corpus_polarity: Mapping[str, float] | None = None,
    confidence: LabelConfidence | None = None,
) -> tuple[list[dict], list[dict]]:
    """Seeds of a capability's fluent wrappers, and the found sentences the seed checks
    rejected on the way (sentences are drawn at random and checked until each wrapper
    has its share; a sentence is used once per capability)."""
    rng = random.Random(f"{seed}:{spec.id}:fluent")
    budget = math.ceil(max_seeds / len(spec.fluent))
    seeds, rejected, used = [], [], set()
    for i, wrapper in enumerate(spec.fluent):
        pool = [(name, sd) for name in wrapper.sentence for sd in found.get(name, [])]
        rng.shuffle(pool)
        checks = seed_checks(neutral_label, wrapper, corpus_polarity, confidence)
        made, pos = 0, 0
        while made < budget and pos < len(pool):
            need = budget - made
            chunk = [(n, sd) for n, sd in pool[pos : pos + need] if sd["id"] not in used]
            pos += need
            out = apply_checks([_candidate(spec, n, sd) for n, sd in chunk], checks)
            rejected.extend(out.rejected)
            for row in out.kept:
                template = rng.choice(wrapper.templates[row["form"]])
                wrap = fill_template(template, "{s}", {k: rng.choice(v) for k, v in wrapper.choose.items()})
                used.add(row["id"])
                made += 1
                seeds.append(
                    {
                        "text": wrap.replace("{s}", row["core"]),
                        "core": row["core"],
                        "wrap": wrap,
                        "core_polarity": row["label"],
                        "label": wrapper.label,
                        "sources": [row["id"]],
                        "rules": [row["rule"]],
                        "template_id": f"{spec.id}.fluent{i}.{row['form']}",
                        "accepts": wrapper.accepts,
                        "checks": row["checks"],
                        # what the wrapper denies whole (an expansion may not add to it)
                        "denied_form": row["form"] if wrapper.exclude_negated else None,
                    }
                )
    unique = {(s["text"], s["label"]): s for s in seeds}
    return list(unique.values())[:max_seeds], rejected


def seed_rows(
    specs: Sequence[CapabilitySpec],
    searched: pa.Table,
    *,
    suite: str,
    max_seeds: int,
    seed: int,
    neutral_proxy: bool,
    neutral_label: str = "neutral",
) -> list[dict]:
    """``checked_seed_rows`` with the paper's wrappers and no checks (the seeds only)."""
    rows, _ = checked_seed_rows(
        specs,
        searched,
        suite=suite,
        max_seeds=max_seeds,
        seed=seed,
        neutral_proxy=neutral_proxy,
        neutral_label=neutral_label,
        wrappers="paper",
    )
    return rows


def checked_seed_rows(
    specs: Sequence[CapabilitySpec],
    searched: pa.Table,
    *,
    suite: str,
    max_seeds: int,
    seed: int,
    neutral_proxy: bool,
    neutral_label: str = "neutral",
    wrappers: str = "fluent",
    corpus_polarity: Mapping[str, float] | None = None,
    confidence: LabelConfidence | None = None,
) -> tuple[list[dict], list[dict]]:
    """Seeds of every capability (not yet parsed) from the search rules' matches
    (``searched``: the parse stage's ``id``, ``matches`` and ``tokens`` columns), and the
    found sentences the seed checks rejected (``wrappers: fluent``; the paper's wording
    checks nothing); suites are named ``<suite>-<capability id>``. ``confidence``: how
    surely each searched sentence carries its corpus label (``s2lct.label_check``)."""
    rows = searched.select(["id", "matches", "tokens"]).to_pylist()
    out, rejected = [], []
    for spec in specs:
        found: dict[str, list[dict]] = {}
        for row in rows:
            for rule in json.loads(row["matches"]).get(spec.id, []):
                found.setdefault(rule, []).append({"id": row["id"], "tokens": json.loads(row["tokens"])})
        neutral_rules = {r.name for r in spec.search if r.label == neutral_label}
        spec_suite = f"{suite}-{spec.id}"
        passed: dict[str, list[str]] = {}
        if wrappers == "fluent" and spec.fluent:
            built, refused = fluent_seeds(spec, found, max_seeds, seed, neutral_label, corpus_polarity, confidence)
        elif wrappers == "fluent":
            screened, refused, passed = screen_found(spec, found, neutral_label, corpus_polarity, confidence)
            built = build_seeds(spec, screened, max_seeds, seed)
        else:
            built, refused = build_seeds(spec, found, max_seeds, seed), []
        for row in refused:
            row.pop("tokens", None)
            rejected.append(
                {
                    **row,
                    "case_id": case_id(METHOD, spec_suite, row["text"], row["label"]),
                    "suite": spec_suite,
                    "expected_label": row["label"],
                    "meta": {"kind": "seed", "capability_id": spec.id, "rule": row["rule"]},
                }
            )
        for sd in built:
            checks = sd.get("checks") or (passed.get(sd["sources"][0], []) if len(sd["sources"]) == 1 else [])
            # LC1/LC2 expansions must satisfy the rule that found their seed again.
            rule = spec.rule(sd["rules"][0]) if spec.recheck_rule and not spec.transforms else None
            out.append(
                {
                    "case_id": case_id(METHOD, spec_suite, sd["text"], sd["label"]),
                    "capability_id": spec.id,
                    "capability": spec.name,
                    "suite": spec_suite,
                    "text": sd["text"],
                    "label": sd["label"],
                    "sources": json.dumps(sd["sources"]),
                    "rules": json.dumps(sd["rules"]),
                    "template_id": sd["template_id"],
                    "accepts": json.dumps(sd["accepts"]),
                    "label_source": "lexicon-proxy" if neutral_proxy and set(sd["rules"]) & neutral_rules else "corpus",
                    "found": json.dumps({name: len(v) for name, v in found.items()}),
                    "rule": json.dumps(rule.model_dump(mode="json")) if rule else None,
                    "core": sd["core"],
                    "wrap": sd["wrap"],
                    "core_polarity": sd["core_polarity"],
                    "denied_form": sd.get("denied_form"),
                    "checks": json.dumps(checks),
                }
            )
    return out, rejected
