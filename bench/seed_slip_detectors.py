"""Can a packaged model tell a seed with its writer's slip from a clean one?

A COSTELLO triple copies its seed into all three sentences, so a slip the reviewer left
("This must me one of the worst", "the best drug addition movies", "The jokes and script
was terrible!") makes the triple unfluent whatever the edit does. ``seed_slips.py`` names
the slips a rule can see; the rest are real English words in the wrong place. This script
asks whether a model sees them, on the seeds people read (``bench/data/annotations``):

* a slip: a triple read as not fluent whose note puts the fault on the seed as written;
* clean: a triple read as fluent (so its seed is fluent too).

Detectors, each scored by ROC AUC and by the slips it catches while it keeps 90 % of the
clean seeds:

* ``slor``: the fluency LM's (SmolLM2-135M, ``actors/lm_scorer.py``) sentence log-probability
  minus the reference corpus's unigram log-probability, per word (SLOR, Kann et al. 2018);
* ``llm_judge``: the packaged Qwen2.5-0.5B asked whether the sentence is grammatical, the
  logit of "Yes" minus that of "No" (one forward pass per seed);
* ``link_grammar``: whether CMU's Link Grammar parses every sentence of the seed with no
  word left out; only where its Python module is installed (Debian's ``python3-link-grammar``).

    .venv/bin/python bench/seed_slip_detectors.py [--detectors slor,llm_judge,link_grammar] [--clean-sample 80]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import time
from pathlib import Path

from common import setup_env  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
# Which seeds to read: (name, annotation file pattern). CR3 at size seeds are reviewers'
# whole sentences (IMDB contrast set); CR1's are Rotten Tomatoes fragments, lower case.
SETS = (("CR3 at size", "*atsize*costello_cr3.jsonl"), ("CR1", "*costello_cr1.jsonl"))
# A note that puts the fault on the seed as written (docs/validity.md's wording).
SEED_FAULT = re.compile(r"seed('s own slip| as written| not fluent| is (a fragment|incoherent|broken)| lacks| ends)")
MAX_WORDS = 45  # longer seeds are whole reviews from before sentence-level CR3
_WORD = re.compile(r"\w+(?:'\w+)?|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


def read_seeds(pattern: str) -> list[tuple[str, int]]:
    """Distinct (seed, 1 if a slip else 0) of the judged triples whose files match."""
    out: dict[str, int] = {}
    for path in sorted(ANNOTATIONS.glob(pattern)):
        for line in path.read_text(encoding="utf-8").split("\n"):  # not splitlines: a text may hold U+2028
            if not line.strip():
                continue
            case = json.loads(line)
            if case.get("fluent") is None or len(case["text"].split()) > MAX_WORDS:
                continue
            slip = case["fluent"] == 0 and bool(SEED_FAULT.search(case["note"].lower()))
            if slip or case["fluent"] == 1:
                out[case["text"]] = max(out.get(case["text"], 0), int(slip))
    return sorted(out.items())


def slor_scores(texts: list[str]) -> list[float]:
    from checkray.actors.lm_scorer import CausalLMScorer
    from checkray.engine.costello.context import reference_model
    from checkray.engine.lm_fluency import DEFAULT_MODEL

    ref = reference_model()
    logprobs = CausalLMScorer(DEFAULT_MODEL).logprobs(texts)
    scores = []
    for text, logprob in zip(texts, logprobs):
        words = [w.lower() for w in _WORD.findall(text)]
        unigram = sum(math.log((ref.count(w) + 1) / (ref.total + len(words))) for w in words)
        scores.append((float(logprob) - unigram) / len(words))
    return scores


def llm_judge_scores(texts: list[str]) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from checkray.actors.llm.local_transformers import convert_gguf
    from checkray.actors.llm.packaged import resolve_llm

    folder = convert_gguf(Path(resolve_llm("builtin:qwen2.5-0.5b-instruct")))
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    yes, no = tokenizer.encode("Yes")[0], tokenizer.encode("No")[0]
    scores = []
    for text in texts:
        messages = [
            {"role": "system", "content": "You are a careful copy editor."},
            {
                "role": "user",
                "content": "Is the following sentence grammatical English, with no typo or missing word? "
                f"Ignore lower case and spaces around punctuation.\n\nSentence: {text}\n\nAnswer Yes or No.",
            },
        ]
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
        ids = ids if torch.is_tensor(ids) else ids["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0, -1]
        scores.append(float(logits[yes] - logits[no]))
    return scores


def link_grammar_scores(texts: list[str]) -> list[float] | None:
    """1.0 when the parser links every word of every sentence (``engine/lang/link_grammar``,
    the check COSTELLO runs), else 0.0; None where the parser is not installed."""
    from checkray.engine.lang.link_grammar import available, unlinked_words

    if not available():
        return None
    return [float(not any(unlinked_words(s) for s in _SENTENCE_END.split(t) if s.strip())) for t in texts]


DETECTORS = {"slor": slor_scores, "llm_judge": llm_judge_scores, "link_grammar": link_grammar_scores}


def report(name: str, labels: list[int], scores: list[float]) -> str:
    """AUC (a low score means a slip) and the slips caught at 90 % of clean seeds kept."""
    from sklearn.metrics import roc_auc_score

    auc = roc_auc_score(labels, [-s for s in scores])
    if set(scores) <= {0.0, 1.0}:  # a yes/no detector: what it flags is what it flags
        flagged, rule = [y for s, y in zip(scores, labels) if s == 0.0], "flagged"
    else:
        clean = sorted(s for s, y in zip(scores, labels) if not y)
        cut = clean[int(0.1 * len(clean))]  # below this: the lowest tenth of the clean seeds
        flagged, rule = [y for s, y in zip(scores, labels) if s < cut], "below the clean seeds' 10th percentile"
    return (
        f"{name:<13} AUC {auc:.3f}; {rule}: {sum(flagged)} of {sum(labels)} slips, "
        f"{len(flagged) - sum(flagged)} of {len(labels) - sum(labels)} clean"
    )


def main() -> None:
    setup_env()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--detectors", default="slor,llm_judge,link_grammar")
    parser.add_argument("--clean-sample", type=int, default=80, help="clean seeds per set (every slip is kept)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    names = [d for d in args.detectors.split(",") if d]
    unknown = sorted(set(names) - set(DETECTORS))
    if unknown:
        raise SystemExit(f"error: unknown detectors {unknown} (have: {', '.join(DETECTORS)})")
    rng = random.Random(args.seed)
    for set_name, pattern in SETS:
        seeds = read_seeds(pattern)
        slips = [s for s in seeds if s[1]]
        clean = [s for s in seeds if not s[1]]
        sample = slips + rng.sample(clean, min(args.clean_sample, len(clean)))
        texts, labels = [t for t, _ in sample], [y for _, y in sample]
        print(f"\n## {set_name}: {len(slips)} seeds with a slip, {len(sample) - len(slips)} clean (of {len(clean)})")
        for name in names:
            start = time.perf_counter()
            scores = DETECTORS[name](texts)
            if scores is None:
                print(f"{name:<13} not installed here")
                continue
            print(f"{report(name, labels, scores)} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
