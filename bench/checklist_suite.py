"""A CheckList-format sentiment suite at the size of CheckList's released one, built here.

CheckList's ``release_suites/sentiment_suite.tar.gz`` cannot be downloaded here, and the
``checklist`` package does not build from PyPI on this machine, so this writes a suite of
the same shape with the stand-in classes of ``tests/fakes/checklist_format.py`` (pickled
with dill like CheckList's ``TestSuite.save``): labels 0/1/2 (negative/neutral/positive);
MFTs over the bundled Rotten Tomatoes sentences and templates (one with a custom
"not negative" lambda, which the import maps with a YAML file); INV typos, punctuation
and names (``INV(threshold=0.1)``); DIR added phrases (``Expect.monotonic``). Flattened,
it has 166,010 rows with the default 8,530 sentences.

    .venv/bin/python bench/checklist_suite.py --out runs/bench_checklist [--rt 8530]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
POS = [
    "good",
    "great",
    "excellent",
    "wonderful",
    "brilliant",
    "enjoyable",
    "fantastic",
    "lovely",
    "superb",
    "charming",
    "delightful",
    "moving",
    "funny",
    "clever",
    "beautiful",
    "amazing",
    "fresh",
    "smart",
    "touching",
    "terrific",
]
NEG = [
    "bad",
    "awful",
    "terrible",
    "boring",
    "dull",
    "horrible",
    "poor",
    "weak",
    "lame",
    "tedious",
    "painful",
    "stupid",
    "ugly",
    "annoying",
    "bland",
    "mediocre",
    "messy",
    "predictable",
    "pointless",
    "dreadful",
]
NEUTRAL = ["long", "short", "american", "french", "new", "old", "black and white", "animated", "silent", "recent"]
NOUNS = [
    "movie",
    "film",
    "plot",
    "story",
    "script",
    "cast",
    "acting",
    "ending",
    "director",
    "soundtrack",
    "dialogue",
    "sequel",
    "premise",
    "performance",
    "cinematography",
    "comedy",
    "drama",
    "thriller",
    "character",
    "scene",
    "screenplay",
    "picture",
    "show",
    "series",
    "documentary",
    "remake",
    "lead",
    "score",
    "pacing",
    "finale",
]
FRAMES = [
    "This {noun} is {adj}.",
    "The {noun} was {adj}.",
    "What a {adj} {noun}.",
    "I think the {noun} is {adj}.",
    "It is a {adj} {noun}.",
    "That {noun} seemed {adj}.",
]
NAMES = ["John", "Mary", "Ahmed", "Mei", "Carlos", "Priya", "Olga", "Kwame", "Sven", "Aiko"]
POS_PHRASES = ["I loved it.", "Really great.", "Highly recommended.", "A joy to watch."]
NEG_PHRASES = ["I hated it.", "Truly awful.", "A waste of time.", "Avoid it."]


def _typo(rng: np.random.Generator, text: str) -> str:
    if len(text) < 4:
        return text + text[-1:]
    i = int(rng.integers(0, len(text) - 2))
    return text[:i] + text[i + 1] + text[i] + text[i + 2 :]


def build(cl, n_rt: int, rng: np.random.Generator):
    """A ``TestSuite`` of the stand-in classes ``cl`` (``fake_checklist()``)."""
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus

    corpus = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes"))
    texts = corpus.column("text").to_pylist()[:n_rt]
    labels = [2 if label == "positive" else 0 for label in corpus.column("label").to_pylist()[:n_rt]]
    suite = cl.TestSuite()
    suite.add(cl.MFT(texts, labels=labels), "Rotten Tomatoes sentences", "Vocabulary", "real sentences, gold label")

    def filled(adjs):
        return [f.format(noun=n, adj=a) for f, n, a in itertools.product(FRAMES, NOUNS, adjs)]

    pos, neg = filled(POS), filled(NEG)
    suite.add(
        cl.MFT(pos + neg, labels=[2] * len(pos) + [0] * len(neg)), "Sentiment-laden words in context", "Vocabulary"
    )
    neutral = filled(NEUTRAL)
    suite.add(cl.MFT(neutral, labels=1), "Neutral words in context", "Vocabulary")
    negated_pos = [
        t.replace(" is ", " is not ").replace(" was ", " was not ") for t in pos if " is " in t or " was " in t
    ]
    suite.add(cl.MFT(negated_pos, labels=0), "Simple negations: negative", "Negation")
    negated_neg = [
        t.replace(" is ", " is not ").replace(" was ", " was not ") for t in neg if " is " in t or " was " in t
    ]
    not_negative = cl.Expect.single(lambda x, pred, *args: pred != 0)  # CheckList's custom "not negative"
    suite.add(cl.MFT(negated_neg, expect=not_negative), "Simple negations: not negative", "Negation")
    suite.add(cl.INV([[t, _typo(rng, t), _typo(rng, _typo(rng, t))] for t in texts]), "Add typos", "Robustness")
    suite.add(cl.INV([[t, t.rstrip(" .!") + " !"] for t in texts]), "Change punctuation", "Robustness")
    suite.add(
        cl.INV([[t, f"@film_fan {t}", f"{t} https://t.co/x{i}"] for i, t in enumerate(texts)]),
        "Add random urls and handles",
        "Robustness",
    )
    name_cases = []
    for i, (noun, adj) in enumerate(itertools.product(NOUNS, POS + NEG)):
        a, b, c = (NAMES[(i + k) % len(NAMES)] for k in range(3))
        for frame in ("{n} says the {noun} is {adj}.", "According to {n}, the {noun} was {adj}."):
            name_cases.append([frame.format(n=x, noun=noun, adj=adj) for x in (a, b, c)])
    suite.add(cl.INV(name_cases, threshold=0.1), "Change names", "Fairness")
    up = cl.Expect.monotonic(label=2, increasing=True, tolerance=0.1)
    down = cl.Expect.monotonic(label=2, increasing=False, tolerance=0.1)
    suite.add(
        cl.DIR([[t] + [f"{t} {p}" for p in rng.choice(POS_PHRASES, 2, replace=False)] for t in texts], up),
        "Add positive phrases",
        "Vocabulary",
    )
    suite.add(
        cl.DIR([[t] + [f"{t} {p}" for p in rng.choice(NEG_PHRASES, 2, replace=False)] for t in texts], down),
        "Add negative phrases",
        "Vocabulary",
    )
    intens = cl.Expect.monotonic(label=None, increasing=True, tolerance=0.1)
    suite.add(
        cl.DIR([[t, f"Honestly, {t[0].lower()}{t[1:]}"] for t in texts], intens), "Add hedges keep label", "Robustness"
    )
    return suite


def count_rows(suite) -> int:
    return sum(len(x) if isinstance(x, list) else 1 for t in suite.tests.values() for x in t.data)


MAPPING = """# Tests whose expectation is a custom function CheckList cannot describe as data.
tests:
  "Simple negations: not negative":
    labels: [neutral, positive]
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "runs" / "bench_checklist"))
    parser.add_argument(
        "--rt", type=int, default=8530, help="Rotten Tomatoes sentences used (suite size scales with it)"
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.fakes.checklist_format import dump_suite, fake_checklist

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with fake_checklist() as cl:
        suite = build(cl, args.rt, np.random.default_rng(0))
        dump_suite(suite, out / "sentiment_suite.pkl")
    (out / "mapping.yaml").write_text(MAPPING)
    print(f"{out / 'sentiment_suite.pkl'}: {len(suite.tests)} tests, {count_rows(suite)} cases flattened")


if __name__ == "__main__":
    main()
