"""TestAug generation (Yang et al., §4.1): capability descriptions with seed cases, the
prompt of Table 2 / Table 7, and lenient parsing of what the LLM writes back.

A *description* groups the templates of a spec (``checkray.engine.templates.expand.read_spec``) that share
capability, description text and label; its seed cases are a few expansions of each of
its templates. The prompt is the description followed by three sampled seeds as
``- { case }`` lines (pairs: ``- {{ text }`` / ``- { text_pair }}``), as in the paper.

Parsing never raises: every item that cannot be read as a case is counted (``unparsed``)
with a few examples, so a weak model's malformed answers show up in the report.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from checkray.engine.llm_output import clean_output
from checkray.engine.schema import normalize_text as normalize  # one comparison key for every generated suite
from checkray.engine.templates.expand import Template, expand_template


@dataclass
class SeedCase:
    text: str
    text_pair: str | None
    template_id: str
    filling: dict[str, Any]


@dataclass
class Description:
    """One test of a capability: what the LLM is asked to write more of."""

    key: str  # stable id: "d01", "d02", ... in spec order
    capability: str
    description: str
    label: str
    is_pair: bool
    templates: list[Template]
    seeds: list[SeedCase] = field(default_factory=list)


def describe_templates(
    templates: Sequence[Template], seeds_per_template: int, seed: int, max_combinations: int = 100_000
) -> list[Description]:
    """Group templates into descriptions (spec order) and draw each one's seed cases."""
    groups: dict[tuple, Description] = {}
    for t in templates:
        text = t.meta.get("description") or t.meta.get("original_description") or t.capability
        is_pair = len(t.texts) == 2
        key = (t.capability, text, t.label, is_pair)
        if key not in groups:
            groups[key] = Description(f"d{len(groups) + 1:02d}", t.capability, text, t.label, is_pair, [])
        d = groups[key]
        if any(x.template_id == t.template_id for x in d.templates):
            continue  # the QQP dump repeats records: same template, same seeds
        d.templates.append(t)
        for texts, filling in expand_template(t, seeds_per_template, seed, max_combinations):
            d.seeds.append(SeedCase(texts[0], texts[1] if is_pair else None, t.template_id, filling))
    return list(groups.values())


# ------------------------------------------------------------------------ prompts


def format_case(text: str, text_pair: str | None = None) -> str:
    """``- { text }`` or, for a pair, ``- {{ text }`` newline ``- { text_pair }}``."""
    if text_pair is None:
        return f"- {{ {text} }}"
    return f"- {{{{ {text} }}\n- {{ {text_pair} }}}}"


def sample_seeds(desc: Description, k: int, rng: np.random.Generator) -> list[SeedCase]:
    """``k`` distinct seed cases (fewer when the description has fewer)."""
    take = rng.choice(len(desc.seeds), size=min(k, len(desc.seeds)), replace=False)
    return [desc.seeds[i] for i in sorted(take.tolist())]


def seed_entry(seed: SeedCase) -> str:
    """How a prompt's shown seed is recorded with its answer ("template_id<TAB>filling"):
    enough for the expansion (§4.3) to find the slots the seed filled."""
    return seed.template_id + "\t" + json.dumps(seed.filling)


def shown_seed(entry: str) -> SeedCase:
    """A seed shown in a prompt, read back from its ``seed_entry`` (no text: not needed)."""
    template_id, filling = entry.split("\t", 1)
    return SeedCase("", None, template_id, json.loads(filling))


def prompt_examples(seeds: Sequence[SeedCase]) -> str:
    """The demonstration block of Table 2 / Table 7 (pairs are separated by a blank line)."""
    sep = "\n\n" if seeds and seeds[0].text_pair is not None else "\n"
    return sep.join(format_case(s.text, s.text_pair) for s in seeds)


# ------------------------------------------------------------------------ parsing


@dataclass
class ParseCount:
    outputs: int = 0  # LLM answers read
    items: int = 0  # cases parsed
    unparsed: int = 0  # lines/items that could not be read as a case
    examples: list[str] = field(default_factory=list)  # a few unparsed items

    def miss(self, item: str) -> None:
        self.unparsed += 1
        if len(self.examples) < 3:
            self.examples.append(item[:120])


_BULLET = re.compile(
    r"^\s*(?:[-*\u2022]|\d+[.)]|(?:test case|case|example|test|output|expected output)\s*\d*\s*[:.)-])\s*",
    re.IGNORECASE,
)
_LABELED_QUOTE = re.compile(r'^[A-Za-z][\w ]{0,30}:\s*"([^"]+)"\s*$')  # Test 1: "..." / Expected Output: "..."
_BRACED = re.compile(r"\{+\s*([^{}]+?)\s*\}+")
_CHATTER = re.compile(r"^(?:sure|here (?:are|is)|certainly|of course|these|i hope|note|okay|ok)\b", re.IGNORECASE)
# What small models write besides cases: new "descriptions" and explanations of their cases.
_NOT_A_CASE = re.compile(
    r"^(?:(?:an?|two) (?:\w+ ){0,2}sentences? (?:with|where|that|about|in)\b|"
    r"(?:this|the|each) (?:test )?(?:case|sentence|example)s? (?:uses|is|has|shows|contains)\b)",
    re.IGNORECASE,
)
_PAIR = re.compile(r"\{\{\s*([^{}]+?)\s*\}\s*(?:-\s*)?\{\s*([^{}]+?)\s*\}\}", re.DOTALL)
_LOOSE_PAIR = re.compile(r"\{\s*([^{}]+?)\s*\}\s*(?:-\s*)?\{\s*([^{}]+?)\s*\}", re.DOTALL)
MIN_WORDS, MAX_WORDS = 3, 60


def _clean(text: str) -> str:
    """A case without artefacts around it (``Explanation:``, numbering, quotes: ``clean_output``)."""
    return clean_output(text)


def _is_case(text: str) -> bool:
    words = re.findall(r"[A-Za-z']+", text)
    return MIN_WORDS <= len(words) <= MAX_WORDS and not _NOT_A_CASE.match(text)


def _lines(raw: str, truncated: bool, count: ParseCount) -> list[str]:
    """Non-empty lines; the last one of an answer cut at max_tokens is counted, not used."""
    lines = [ln.strip() for ln in raw.splitlines() if ln.strip()]
    if truncated and lines:
        count.miss(lines.pop())
    return lines


def parse_single_cases(raw: str, count: ParseCount, *, truncated: bool = False) -> list[str]:
    """Cases from one answer: ``- { case }`` lines; bare bullet/numbered lines and
    ``Label: "case"`` lines are accepted too (small models drop the braces). Chatter lines
    ("Sure! Here are...") are skipped without counting; every other line that is not a case
    (too short or long, a made-up description, an explanation) is counted as unparsed."""
    count.outputs += 1
    out = []
    for line in _lines(raw, truncated, count):
        braced = _BRACED.findall(line)
        if braced:
            found = [_clean(b) for b in braced if _is_case(_clean(b))]
            out += found
            if not found:
                count.miss(line)
            continue
        quoted = _LABELED_QUOTE.match(line)
        if quoted and _is_case(_clean(quoted.group(1))):
            out.append(_clean(quoted.group(1)))
            continue
        if _CHATTER.match(line) or line.endswith(":"):
            continue
        bare = _clean(_BULLET.sub("", line))
        if _BULLET.match(line) and _is_case(bare):
            out.append(bare)
        else:
            count.miss(line)
    count.items += len(out)
    return out


def parse_pair_cases(raw: str, count: ParseCount, *, truncated: bool = False) -> list[tuple[str, str]]:
    """Pairs from one answer: ``- {{ a } - { b }}`` (on one or two lines); two plain
    braced items in a row (``{ a } { b }``) are accepted; a lone item is unparsed."""
    count.outputs += 1
    out: list[tuple[str, str]] = []
    rest = "\n".join(_lines(raw, truncated, count))
    for pattern in (_PAIR, _LOOSE_PAIR):
        found = []
        for m in pattern.finditer(rest):
            a, b = _clean(m.group(1)), _clean(m.group(2))
            if _is_case(a) and _is_case(b):
                found.append((a, b))
            else:
                count.miss(m.group(0))
        out += found
        rest = pattern.sub("\n", rest)
    for line in rest.splitlines():  # what is left: single items, chatter, free text
        line = line.strip().strip("-").strip()
        if not line or _CHATTER.match(line) or line.endswith(":"):
            continue
        if re.search(r"[A-Za-z]", line):
            count.miss(line)
    count.items += len(out)
    return out


# ------------------------------------------------------------------------ de-duplication


def dedupe(cases: Sequence[dict], seen: set[tuple] | None = None) -> tuple[list[dict], int]:
    """Drop cases whose normalized (text, text_pair) is in ``seen`` (e.g. the seeds) or
    appeared earlier; returns (kept, dropped). ``seen`` is updated."""
    seen = set() if seen is None else seen
    kept, dropped = [], 0
    for case in cases:
        key = (normalize(case["text"]), normalize(case.get("text_pair") or ""))
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        kept.append(case)
    return kept, dropped


def seed_keys(desc: Description) -> set[tuple]:
    return {(normalize(s.text), normalize(s.text_pair or "")) for s in desc.seeds}
