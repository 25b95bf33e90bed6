"""Sentence corpora cut from the bundled IMDB reviews (``builtin:imdb``), for reading
COSTELLO (or any sentence-level generator) on user reviews instead of SST's edited
critics' snippets, with a development part and a final part that share no review.

    .venv/bin/python bench/imdb_sentences.py --out DIR [--dev 8000] [--final 10000] [--seed 7]
    .venv/bin/python bench/imdb_sentences.py --out DIR --part final --seed 11 --skip DIR/final.json --name final2

writes ``DIR/dev.json`` (sentences of reviews 0-12,499) and ``DIR/final.json`` (reviews
12,500-24,999) in SST's JSON form ({"i": [sentence, label]}), each a seeded sample of the
sentences of 8-35 words that open with a capital, end with ".", "!" or "?", and hold no
markup, no "..." and no non-ASCII character; the label is the review's. Point a config's
``corpus.path`` at one (``corpus.labels: {"0": negative, "1": positive}``). A second
draw of a part (``--name``) leaves out the sentences of the files given to ``--skip``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

_SPLIT = re.compile(r'(?<=[.!?])\s+(?=[A-Z"])')
HALF = 12_500  # the reviews of the dev part; the final part reads the rest


def sentences(texts: list[str], labels: list[int]) -> list[tuple[str, int]]:
    out = []
    for text, label in zip(texts, labels):
        for s in _SPLIT.split(text.replace("<br />", " ").replace("<br/>", " ")):
            s = " ".join(s.split())
            n = len(s.split())
            if 8 <= n <= 35 and s[0].isupper() and s[-1] in ".!?" and s.isascii() and "<" not in s and ".." not in s:
                out.append((s, label))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dev", type=int, default=8000)
    ap.add_argument("--final", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--part", choices=("dev", "final", "both"), default="both")
    ap.add_argument("--name", help="file name of the part written (default: the part's)")
    ap.add_argument("--skip", type=Path, nargs="*", default=[], help="corpora whose sentences are left out")
    args = ap.parse_args()
    from checkray.engine.corpus import _builtin

    table = _builtin("imdb")
    texts = table.column("text").to_pylist()
    labels = [int(x) for x in table.column("label").to_pylist()]
    skip = {row[0] for path in args.skip for row in json.loads(path.read_text()).values()}
    args.out.mkdir(parents=True, exist_ok=True)
    for name, lo, hi, k in (("dev", 0, HALF, args.dev), ("final", HALF, len(texts), args.final)):
        if args.part not in (name, "both"):
            continue
        pool = sentences(texts[lo:hi], labels[lo:hi])
        random.Random(args.seed).shuffle(pool)
        pool = [row for row in pool if row[0] not in skip]
        path = args.out / f"{args.name or name}.json"
        path.write_text(json.dumps({str(j): [s, lab] for j, (s, lab) in enumerate(pool[:k])}))
        print(f"wrote {path}: {min(k, len(pool))} of {len(pool)} sentences")


if __name__ == "__main__":
    main()
