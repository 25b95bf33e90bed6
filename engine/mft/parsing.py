"""Pure parts of Li et al.'s MFT generation: parsing LLM output, de-duplication, gates.

Parsers never raise on malformed output: they return what they could read and count
the rest, so a model that ignores the format costs cases, not the job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from checkray.engine.llm_output import clean_output
from checkray.engine.schema import normalize_text

# "Test Case 1: <summary> Customer Review: <review>" with any spacing/markdown between.
_CASE = re.compile(
    r"Test\s*Case\s*\d+\s*[:.\-]\s*(?P<summary>.*?)\s*\**\s*Customer\s*Review\s*\**\s*[:\-]\s*(?P<review>.*?)"
    r"(?=\n?\s*\**\s*Test\s*Case\s*\d+|\Z)",
    re.IGNORECASE | re.DOTALL,
)
# Fallback for answers that number their cases without "Customer Review:" fields.
_CASE_LINE = re.compile(
    r"^\s*\**\s*(?:Test|Sample)?\s*Case\s*\d+\s*\**\s*[:.\-]\s*\**\s*(?P<review>.+?)\s*$", re.IGNORECASE | re.MULTILINE
)
_REVIEW_LINE = re.compile(r"Customer\s*Review\s*\**\s*[:\-]\s*\**\s*(?P<review>[^\n]+)", re.IGNORECASE)
# The last resort for answers with no case markers at all: one sentence after an intro
# that ends with a colon, closing the answer; talk about the task itself is not a review.
_AFTER_INTRO = re.compile(r":\s*(?P<review>[^:\n]+[.!?\"])\s*\Z")
_META_TALK = re.compile(r"\b(MFT|minimal|minimum|functional|test cases?|samples?)\b", re.IGNORECASE)
_NUMBERED = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*(?P<text>.+?)\s*$", re.MULTILINE)
# Lines around an answer's rephrasings that are not rephrasings: an intro ending in a colon
# ("Here are two rephrased versions:"), or the assistant's sign-off ("Feel free to ask ...").
_CHATTER = re.compile(
    r"(:\s*$)|^\s*(feel free|let me know|i hope|hope (this|these)|note\b|sure\b|certainly\b|of course\b"
    r"|here (are|is)\b|these (are|rephras|sentences|versions)|(rephras|paraphras)\w*\s*\d*\s*[:.]?\s*$)",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"Label\s*[:\-]\s*\**\s*(?:\d\.?\s*)?(?P<label>positive|negative|hard(?:\s*to\s*decide)?|neutral)", re.IGNORECASE
)
_REASON = re.compile(r"Reason\s*[:\-]\s*(?P<reason>.+)", re.IGNORECASE | re.DOTALL)


@dataclass
class ParseStats:
    """What a parser saw: outputs read, items produced, outputs with nothing usable."""

    outputs: int = 0
    items: int = 0
    unparsed: int = 0
    examples: list[str] = field(default_factory=list)  # a few unparsed outputs, for the report

    def add(self, raw: str, n_items: int) -> None:
        self.outputs += 1
        self.items += n_items
        if n_items == 0:
            self.unparsed += 1
            if len(self.examples) < 3:
                self.examples.append(raw[:300])


def _clean(text: str) -> str:
    """A field without the artefacts around it: markdown, numbering, ``Explanation:``-style
    labels, quotes, brackets, trailing commentary (``clean_output``)."""
    return clean_output(re.sub(r"\s+", " ", text).strip(" *"))


MAX_REVIEW_WORDS = 60  # the prompt asks for one sentence; longer is a run-on or a loop


def parse_mft_cases(raw: str, stats: ParseStats | None = None) -> list[tuple[str, str]]:
    """(topic summary, review) pairs from a Figure 5/6-style answer. Reviews of more than
    ``MAX_REVIEW_WORDS`` words (degenerate repetition of small models) are not kept."""
    pairs = []
    for m in _CASE.finditer(raw or ""):
        if m.group("review").strip().startswith("["):  # the format's placeholder echoed back
            continue
        summary = _clean(m.group("summary"))
        review = _clean(m.group("review").strip().split("\n\n")[0])
        if len(review.split()) >= 2:
            pairs.append((summary, review))
    # Small models often drop half of the format: keep what is still unambiguous.
    if not pairs:
        for m in _REVIEW_LINE.finditer(raw or ""):
            review = _clean(m.group("review"))
            if len(review.split()) >= 3 and not m.group("review").strip().startswith("["):
                pairs.append(("", review))
    if not pairs and not re.search(r"Customer\s*Review\s*\**\s*[:\-]", raw or "", re.IGNORECASE):
        for m in _CASE_LINE.finditer(raw or ""):
            review = _clean(m.group("review"))
            if len(review.split()) >= 3 and not m.group("review").strip().startswith("["):
                pairs.append(("", review))
    if not pairs:  # "One MFT sample as a customer review is:\nThe wordy wisp of a comedy fails."
        m = _AFTER_INTRO.search((raw or "").strip())
        review = _clean(m.group("review")) if m else ""
        if len(review.split()) >= 5 and not _META_TALK.search(review):
            pairs.append(("", review))
    pairs = [(s, r) for s, r in pairs if len(r.split()) <= MAX_REVIEW_WORDS]
    if stats is not None:
        stats.add(raw or "", len(pairs))
    return pairs


def format_mft_cases(pairs: list[tuple[str, str]]) -> str:
    """Pairs back into the answer format, for the few-shot example of Figure 6."""
    return "\n".join(f"Test Case {i}: {s}\nCustomer Review: {r}" for i, (s, r) in enumerate(pairs, 1))


def _without_review_field(line: str) -> str:
    """The text of a "Customer Review: text" line; any other line unchanged."""
    field = _REVIEW_LINE.search(line)
    return field.group("review") if field else line


def parse_paraphrases(raw: str, original: str, n: int, stats: ParseStats | None = None) -> list[str]:
    """Up to ``n`` rephrasings, excluding copies of the original.

    The prompt asks for a numbered list; small models often answer with one rephrasing per
    line or per paragraph instead, so an answer without a numbered or bulleted line is
    read line by line, skipping the intro and sign-off around the rephrasings.
    """
    numbered = [m.group("text") for m in _NUMBERED.finditer(raw or "")]
    lines = numbered or [
        _without_review_field(line)
        for line in (raw or "").splitlines()
        if line.strip() and not _CHATTER.search(line) and not _META_TALK.search(line)
    ]
    seen = {normalize_text(original)}
    out = []
    for line in lines:
        text = _clean(line)
        key = normalize_text(text)
        # under three words is a fragment cut off by max_tokens ("The movie"), not a rephrasing
        words = len(text.split())
        if 3 <= words <= MAX_REVIEW_WORDS and key not in seen and not text.startswith("["):
            seen.add(key)
            out.append(text)
        if len(out) == n:
            break
    if stats is not None:
        stats.add(raw or "", len(out))
    return out


def parse_label(raw: str, stats: ParseStats | None = None) -> tuple[str | None, str]:
    """("positive" | "negative" | "hard" | None, reason) from a Figure 9-style answer."""
    m = _LABEL.search(raw or "")
    label = None
    if m:
        word = m.group("label").lower()
        label = "hard" if word.startswith("hard") or word == "neutral" else word
    reason = _REASON.search(raw or "")
    if stats is not None:
        stats.add(raw or "", int(label is not None))
    return label, _clean(reason.group("reason")) if reason else ""


def dedupe_exact(texts: list[str]) -> list[int]:
    """Indices of the first occurrence of each normalized text."""
    seen: set[str] = set()
    keep = []
    for i, t in enumerate(texts):
        key = normalize_text(t)
        if key and key not in seen:
            seen.add(key)
            keep.append(i)
    return keep


def dedupe_near(embeddings: np.ndarray, threshold: float) -> list[int]:
    """Greedy near-duplicate removal: keep a row unless its cosine similarity to an
    already kept row is >= ``threshold``. Rows are expected L2-normalised."""
    kept: list[int] = []
    if len(embeddings) == 0:
        return kept
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    unit = embeddings / np.where(norms == 0, 1, norms)
    for i in range(len(unit)):
        if not kept or float(np.max(unit[kept] @ unit[i])) < threshold:
            kept.append(i)
    return kept
