"""How much of a corpus's sentiment vocabulary the curated COSTELLO substitutes cover.

Tags the corpus with spaCy, counts the adjectives and verbs COSTELLO would substitute
(a polar word by VADER + AFINN, a substitutable tag), and prints the share of those
occurrences whose lemma ``engine/data/costello_substitutes.yaml`` lists, with candidates or
as ``never``; ``--top N`` lists the most frequent polar lemmas the table lacks.

    .venv/bin/python bench/costello_substitute_coverage.py [--corpus builtin:rotten_tomatoes] [--top 30]
"""

from __future__ import annotations

import argparse
from collections import Counter


def polar_lemmas(texts: list[str]) -> Counter:
    from checkray.actors.spacy_nlp import load_spacy
    from checkray.engine.costello.checked import WORD_TAGS
    from checkray.engine.lang.polarity import polarity_class

    nlp = load_spacy("builtin:sm", disable=("ner",))
    counts: Counter = Counter()
    for doc in nlp.pipe(texts, batch_size=256):
        for tok in doc:
            if tok.pos_ in ("ADJ", "VERB") and tok.tag_ in WORD_TAGS and tok.text.isalpha():
                lemma = tok.lemma_.lower()
                if polarity_class(tok.text.lower(), lemma) != "neutral":
                    counts[(lemma, tok.pos_)] += 1
    return counts


def main() -> None:
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus
    from checkray.engine.costello.substitutes import curated_substitutes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="builtin:rotten_tomatoes")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    texts = read_corpus(CorpusConfig(path=args.corpus)).column("text").to_pylist()
    counts = polar_lemmas(texts)
    table = curated_substitutes()
    total = sum(counts.values())
    listed = sum(n for key, n in counts.items() if key in table)
    never = sum(n for key, n in counts.items() if key in table and table[key].never)
    print(f"corpus {args.corpus}: {len(texts)} texts, {total} polar adjective/verb occurrences, {len(counts)} lemmas")
    print(f"table: {len(table)} words ({sum(1 for e in table.values() if e.never)} never substituted)")
    print(f"covered: {listed / total:.1%} of occurrences ({never / total:.1%} as never), the rest go to WordNet")
    missing = [(key, n) for key, n in counts.most_common() if key not in table][: args.top]
    print("most frequent unlisted: " + ", ".join(f"{lemma}/{pos} {n}" for (lemma, pos), n in missing))


if __name__ == "__main__":
    main()
