"""Rule-based stand-ins for an instruct LLM, for testing the jobs' logic fast.

``RuleBasedChat`` follows the mft prompt formats like a cooperative model (MFT cases cut
from the input text, numbered paraphrases, VADER-based labels), ``RuleBasedAugChat`` the
TestAug ones; both, on purpose, answer every ``malformed_every``-th request with text that
ignores the format. ``tests/fakes/llm_server.py`` serves them over HTTP; the real backends
are tested in tests/llm/test_llm_backends.py.
"""

from __future__ import annotations

import re

from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

from checkray.engine.llm import Generation, make_generation

_VADER = SentimentIntensityAnalyzer()


def _input_text(messages) -> str:
    user = messages[-1]["content"]
    for marker in ("following sample: ", "Decide: ", "different ways, each as one short sentence: "):
        if marker in user:
            tail = user.rsplit(marker, 1)[1]
            return tail.split("\n")[0].strip()
    return user


class RuleBasedChat:
    name = "rule-based-test-llm"

    def __init__(self, malformed_every: int = 0, always_hard: bool = False, flawed: bool = False):
        self.calls = 0
        self.malformed_every = malformed_every
        self.always_hard = always_hard
        self.flawed = flawed  # add the failure shapes of a small model's answers (``flaws``)

    def flaws(self, text: str) -> list[str]:
        """What a small model writes besides good cases (the annotated demo's failures): a
        case behind an ``Explanation:`` label, the prompt's words, the input copied, a
        self-contradiction, a second sentence that leaves the review, the first case again, and
        a "neither" of a pair the sentence never names."""
        if not self.flawed:
            return []
        return [
            "Test Case 5: explained\nCustomer Review: Explanation: The soundtrack alone is worth the ticket.",
            "Test Case 6: leak\nCustomer Review: The movie meets the minimum requirements of a functional test.",
            f"Test Case 7: copy\nCustomer Review: {text}",
            "Test Case 8: mixed\nCustomer Review: The documentary is wonderful, it is truly terrible.",
            "Test Case 9: again\nCustomer Review: The soundtrack alone is worth the ticket.",
            "Test Case 10: drift\nCustomer Review: The plot is dull. The director later lost his job.",
            "Test Case 11: pair\nCustomer Review: One crime story is unusual, and neither is well told.",
        ]

    def __call__(self, messages_list, params) -> list[Generation]:
        return [self._one(m) for m in messages_list]

    def _one(self, messages) -> Generation:
        self.calls += 1
        if self.malformed_every and self.calls % self.malformed_every == 0:
            return make_generation("I am sorry, I can only talk about movies in general.", "stop")
        user = messages[-1]["content"]
        text = _input_text(messages)
        words = re.findall(r"[A-Za-z']+", text)
        if "minimal functional test samples" in user:
            # a few of the input's words in a sentence of its own: not a near-copy of it
            chunks = [" ".join(words[i : i + 4]) for i in range(0, min(len(words), 16), 4)] or ["nothing to say"]
            leads = ("Overall", "In short", "For me", "All told")
            cases = [
                f"Test Case {i}: part {i}\nCustomer Review: {leads[i - 1]}, {c.lower()} says it all."
                for i, c in enumerate(chunks, 1)
            ]
            return make_generation("Sure! Here are the MFT samples:\n" + "\n".join(cases + self.flaws(text)), "stop")
        if "Rephrase" in user:
            n = int(re.search(r"in (\d+) different ways", user).group(1))
            outs = [f"{i}. {'Honestly, ' * i}{text}" for i in range(1, n + 1)]
            return make_generation("\n".join(outs), "stop")
        if "label the sentiment" in user:
            if self.always_hard:
                return make_generation("Label: Hard to Decide\nReason: mixed feelings", "stop")
            score = _VADER.polarity_scores(text)["compound"]
            label = "Positive" if score > 0.05 else "Negative" if score < -0.05 else "Hard to Decide"
            return make_generation(f"Label: {label}\nReason: vader compound {score:.2f}", "stop")
        return make_generation("", "stop")


class RuleBasedAugChat:
    """Follows the TestAug prompt like a cooperative model: rewrites each shown seed with a
    new noun ('pilot') and an extra word; marks some rewrites with 'really', which its
    labeler then calls invalid; every ``malformed_every``-th answer ignores the format."""

    name = "rule-based-testaug-llm"

    def __init__(self, malformed_every: int = 4, flawed: bool = False):
        self.calls = 0
        self.malformed_every = malformed_every
        self.flawed = flawed  # add the failure shapes of the annotated demo (``flaws``)

    @staticmethod
    def flaws(description: str, seed: str) -> list[str]:
        """A small model's failures for a description (its first shown seed): a case behind
        an ``Explanation:`` label, the prompt's words, the seed's words reordered (a
        near-copy), a case whose last clause has the wrong polarity (a wrongly labelled
        seed) and a self-contradiction."""
        negative = "negative sentence" in description.lower()
        words = seed.rstrip(".").split()
        return [
            f"- Explanation: {' '.join(words[:-1])} captain.",
            "- { The flight follows the test description well. }",
            f"- {{ {' '.join(reversed(words)).capitalize()}. }}",
            "- { No one admires that food, it is wonderful. }"
            if negative
            else "- { The seat was not lousy at all, it is very disappointing. }",
            "- { The crew is not awful at all, it is very disappointing. }"
            if negative
            else "- { The food was wonderful, it is truly terrible. }",
        ]

    def __call__(self, messages_list, params):
        return [self._one(m) for m in messages_list]

    def _one(self, messages):
        self.calls += 1
        user = messages[-1]["content"]
        if user.startswith("Test description:"):
            case = re.search(r"Test case: (.*)", user).group(1)
            return make_generation("Invalid" if "really" in case else "Valid.", "stop")
        if self.malformed_every and self.calls % self.malformed_every == 0:
            return make_generation("I am sorry, I cannot write test cases today.", "stop")
        seeds = re.findall(r"^- \{ (.*) \}$", user, re.MULTILINE)
        lines = ["Sure! Here are new test cases:"]
        for i, s in enumerate(seeds):
            words = s.rstrip(".").split()
            lines.append(f"- {{ {' '.join(words[:-1])} pilot{'s' * i}. }}")
            lines.append(f"- {{ Honestly, {s[0].lower() + s[1:]} }}")
            lines.append(f"- {{ {s.rstrip('.')} really, {'again ' * (i + self.calls % 3)}. }}")
        if self.flawed and seeds:
            lines += self.flaws(user.split("\n", 1)[0], seeds[0])
        return make_generation("\n".join(lines), "stop")
