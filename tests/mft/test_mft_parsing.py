"""Parsers of LLM output (well-formed, sloppy, malformed), prompts, de-duplication."""

import numpy as np
import pytest

from checkray.engine.errors import ConfigError
from checkray.engine.mft.parsing import (
    ParseStats,
    dedupe_exact,
    dedupe_near,
    format_mft_cases,
    parse_label,
    parse_mft_cases,
    parse_paraphrases,
)
from checkray.engine.prompts import load_prompt, parse_prompt

FIGURE_5 = """Sure! Here are the minimum functionality test (MFT) samples:

Test Case 1: Complex Sound and Maturity

Customer Review: This album showcases McCartney's growth as a composer.

Test Case 2: Flow and Structure
Customer Review: The seamless flow of the album makes it a cohesive listening experience.

Test Case 3: Standout Tracks Customer Review: From the opening notes, it's clear that this album is special.

**Test Case 4:** Emotional Resonance **Customer Review:** "With its themes of love, this album resonates deeply."
"""


def test_parse_mft_cases_reads_the_paper_format_and_variants():
    stats = ParseStats()
    pairs = parse_mft_cases(FIGURE_5, stats)
    assert [s for s, _ in pairs] == [
        "Complex Sound and Maturity",
        "Flow and Structure",
        "Standout Tracks",
        "Emotional Resonance",
    ]
    assert pairs[3][1] == "With its themes of love, this album resonates deeply."
    assert stats.outputs == 1 and stats.items == 4 and stats.unparsed == 0


def test_malformed_generations_are_counted_not_raised():
    stats = ParseStats()
    assert parse_mft_cases("I cannot help with that.", stats) == []
    assert parse_mft_cases("", stats) == []
    assert parse_mft_cases("Test Case 1: [Topic summary] Customer Review: [Customer review text]", stats) == []
    assert stats.outputs == 3 and stats.unparsed == 3 and stats.examples


def test_format_round_trip():
    pairs = [("Size", "Tiny box for the price."), ("Kids", "Kids aren't impressed with this set.")]
    assert parse_mft_cases(format_mft_cases(pairs)) == pairs


def test_parse_paraphrases_numbered_quoted_and_dupes():
    raw = (
        '1. "Underwhelming experience with too much repetition."\n2. Disappointing read with too much dullness.\n'
        "3. Disappointing read with too much monotony.\n- Monotonous content without any excitement.\n"
    )
    out = parse_paraphrases(raw, "Disappointing read with too much monotony.", n=5)
    assert out == [
        "Underwhelming experience with too much repetition.",
        "Disappointing read with too much dullness.",
        "Monotonous content without any excitement.",
    ]
    assert parse_paraphrases("Sure! Here you go:", "x y", 5) == []
    assert parse_paraphrases("1. The movie\n2. The film is a fine example.", "x y", 5) == [
        "The film is a fine example."
    ]


@pytest.mark.parametrize(
    "raw",
    [
        # shapes Qwen2.5-Coder-1.5B answered with in the mft run of 2026-11-25 (docs/mft.md)
        "The plot is deeply engaging.\nI appreciated how the characters interacted.\nFeel free to ask for more!",
        "Here are two rephrased versions of the review:\n\nThe plot is deeply engaging.\n\n"
        "I appreciated how the characters interacted.",
        "Customer Review: The plot is deeply engaging.\nThis minimal functionality test checks the plot.\n"
        "I appreciated how the characters interacted.",
    ],
)
def test_paraphrases_one_per_line_or_paragraph_without_numbers(raw):
    assert parse_paraphrases(raw, "The story kept me hooked.", n=2) == [
        "The plot is deeply engaging.",
        "I appreciated how the characters interacted.",
    ]


def test_numbered_rephrasings_win_over_the_lines_around_them():
    raw = "Certainly, here are two:\n1. The plot is deeply engaging.\nSome note in between.\n2. A fine, warm film."
    assert parse_paraphrases(raw, "x y", n=2) == ["The plot is deeply engaging.", "A fine, warm film."]


@pytest.mark.parametrize(
    "raw,label",
    [
        ("Of course! Here's my response: Label: Negative Reason: The sentence expresses dislike.", "negative"),
        ("Label: 1.Positive\nReason: praise", "positive"),
        ("Label: **Hard to Decide** Reason: mixed", "hard"),
        ("Label: [Fill label here]", None),
        ("The sentiment is unclear.", None),
    ],
)
def test_parse_label(raw, label):
    assert parse_label(raw)[0] == label


def test_dedupe_exact_ignores_case_and_punctuation():
    texts = ["Five stars!", "five stars", "Five  stars!!!", "Great album."]
    assert dedupe_exact(texts) == [0, 3]


def test_dedupe_near_by_cosine():
    e = np.array([[1.0, 0.0], [0.999, 0.04], [0.0, 1.0], [0.7, 0.7]])
    assert dedupe_near(e, threshold=0.95) == [0, 2, 3]
    assert dedupe_near(e, threshold=0.9999) == [0, 1, 2, 3]


def test_prompt_files_render_and_reject_missing_fields():
    prompt = load_prompt("mft_generate")
    messages = prompt.render(example_text="e", example_cases="Test Case 1: a\nCustomer Review: b", input_text="doc")
    assert messages[0]["role"] == "system" and messages[-1]["role"] == "user" and "doc" in messages[-1]["content"]
    with pytest.raises(ConfigError, match="input_text"):
        prompt.render(example_text="e", example_cases="c")
    for name in ("mft_fewshot_example", "mft_paraphrase", "mft_label"):
        assert "input_text" in load_prompt(name).fields
    with pytest.raises(ConfigError):
        parse_prompt("x", "no sections")


def test_cases_without_review_fields_fall_back_to_case_lines():
    raw = "Test Case 1: Do not see this film at all.\nTest Case 2: [Customer review text]\nTest Case 3: Loved every minute of it."
    assert parse_mft_cases(raw) == [("", "Do not see this film at all."), ("", "Loved every minute of it.")]


def test_generate_prompt_is_a_few_shot_conversation():
    messages = load_prompt("mft_generate").render(
        example_text="e", example_cases="Test Case 1: a\nCustomer Review: b c", input_text="doc"
    )
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[-1]["content"].endswith("doc")


@pytest.mark.parametrize(
    "raw,expected",
    [
        (
            "Customer Review: having had the good sense to cast actors, khouri gets terrific performances.",
            [("", "having had the good sense to cast actors, khouri gets terrific performances.")],
        ),
        (
            "Sample Case 1: The music makes it hard to imagine more fun.\nSample Case 2: Great documentary overall.",
            [("", "The music makes it hard to imagine more fun."), ("", "Great documentary overall.")],
        ),
        ("Minimal functional test (MFT) samples for this sample text in one sentence: something", []),
        # the real answers of the packaged 0.5B model in the demo: one review after an intro
        (
            "One minimal functional test sample as customer review in one sentence is:\n"
            "The wordy wisp of a comedy is a simple, comedic play that fails to engage the viewer.",
            [("", "The wordy wisp of a comedy is a simple, comedic play that fails to engage the viewer.")],
        ),
        (
            "Minimal functional test (MFT) samples for this sample text in one sentence: The cinema is a perfect "
            "example of the puro genre, without complex elements.",
            [("", "The cinema is a perfect example of the puro genre, without complex elements.")],
        ),
        ("No visual content provided.", []),
        ("Here is the answer: The minimal functional test sample targets one behavior.", []),
    ],
)
def test_half_formatted_answers_of_small_models(raw, expected):
    assert parse_mft_cases(raw) == expected


def test_run_on_reviews_are_not_kept():
    loop = "Customer Review: " + " ".join(["Do not see this film."] * 20)
    assert parse_mft_cases(loop) == []


def test_grammar_section_is_kept_out_of_the_messages():
    text = "### system\nS {x}\n### user\nU\n### grammar\nroot ::= [a-z]{2,5}\n"
    prompt = parse_prompt("p", text)
    assert prompt.grammar == "root ::= [a-z]{2,5}\n" and prompt.fields == {"x"}
    assert [m["role"] for m in prompt.render(x=1)] == ["system", "user"]
    with pytest.raises(ConfigError, match="more than one"):
        parse_prompt("p", text + '### grammar\nroot ::= "a"\n')


def test_constrained_decoding_uses_each_prompt_files_grammar():
    from checkray.engine.llm import GenerationParams
    from checkray.engine.mft.suite import prompt_params

    base = GenerationParams(temperature=0.7)
    for name in ("mft_fewshot_example", "mft_generate", "mft_paraphrase", "mft_label"):
        prompt = load_prompt(name)
        assert prompt.grammar and prompt.grammar.startswith("root ::=")
        assert prompt_params(prompt, base, constrained=True).grammar == prompt.grammar
        assert prompt_params(prompt, base, constrained=False).grammar is None
    # what the grammars admit is what the parsers read
    example = (
        "Test Case 1: Acting\nCustomer Review: The cast is great.\nTest Case 2: Plot\n"
        "Customer Review: The plot is thin.\nTest Case 3: Music\nCustomer Review: I loved the songs!\n"
        "Test Case 4: Length\nCustomer Review: It runs far too long.\n"
    )
    assert [r for _, r in parse_mft_cases(example)] == [
        "The cast is great.",
        "The plot is thin.",
        "I loved the songs!",
        "It runs far too long.",
    ]
    assert parse_label("Label: Hard to Decide\nReason: mixed") == ("hard", "mixed")
