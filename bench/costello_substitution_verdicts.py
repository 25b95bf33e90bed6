"""How annotated COSTELLO triples read, per substituted word and per candidate.

Reads every annotation batch of a COSTELLO generator (``bench/data/annotations``, dev and
final), takes each judged triple's seed word and closer replacement from its ``source``,
and prints, for the words and (word, replacement) pairs read wrong at least ``--min-wrong``
times, how many triples were read and how many were not right on all three criteria. A
pair the curated table (``engine/data/costello_substitutes.yaml``) no longer offers is
marked, so what is left to weigh stands out.

    .venv/bin/python bench/costello_substitution_verdicts.py [--generator costello_cr1] [--min-wrong 2]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
CRITERIA = ("label_valid", "fluent", "on_capability")


def judged_substitutions(generator: str) -> list[tuple[str, str, bool]]:
    """(seed word, replacement, right on all three) of every judged triple of ``generator``."""
    out = []
    for path in sorted(ANNOTATIONS.glob(f"*{generator}*.jsonl")):
        for line in path.read_text(encoding="utf-8").split("\n"):  # a text may hold U+2028
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("generator") != generator or any(row.get(c) is None for c in CRITERIA):
                continue
            try:
                source = json.loads(row.get("source") or "")
            except json.JSONDecodeError:
                continue
            if "word" in source and "replacement" in source:
                right = all(row[c] == 1 for c in CRITERIA)
                out.append((source["word"].lower(), source["replacement"].lower(), right))
    return out


def offered(word: str, replacement: str) -> bool:
    """Whether the curated table still offers ``replacement`` for ``word`` (any part of
    speech; a word the table lacks is read as offered: WordNet decides)."""
    from checkray.engine.costello.substitutes import curated_substitutes

    entries = [e for (lemma, _), e in curated_substitutes().items() if lemma == word]
    return not entries or any(replacement in e.synonyms + e.antonyms for e in entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generator", default="costello_cr1")
    parser.add_argument("--min-wrong", type=int, default=2)
    args = parser.parse_args()
    rows = judged_substitutions(args.generator)
    print(f"{len(rows)} judged {args.generator} triples")
    for title, key in (("word", lambda r: r[0]), ("word -> replacement", lambda r: f"{r[0]} -> {r[1]}")):
        read, wrong = Counter(), Counter()
        for r in rows:
            read[key(r)] += 1
            wrong[key(r)] += not r[2]
        print(f"\n| {title} | read | wrong |\n| --- | --- | --- |")
        for k, n in sorted(wrong.items(), key=lambda kv: (-kv[1], kv[0])):
            if n < args.min_wrong:
                break
            gone = "" if " -> " not in k or offered(*k.split(" -> ")) else " (no longer offered)"
            print(f"| {k}{gone} | {read[k]} | {n} |")


if __name__ == "__main__":
    main()
