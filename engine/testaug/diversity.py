"""Diversity of a test suite (TestAug §5.3, Table 5): Self-BLEU-4 and unique dependency paths.

* Self-BLEU (Zhu et al., 2018): the mean over sentences of the BLEU-4 of each sentence
  against all the others as references, with sacreBLEU's sentence BLEU (its tokenizer,
  n-grams, brevity penalty, exponential smoothing, effective order). Lower is more
  diverse. The references' n-gram counts are merged once (top-2 count per n-gram), so a
  hypothesis costs its own n-grams, not a pass over the other n - 1 sentences; chunks of
  hypotheses run as Ray tasks when Ray is up (the sentences go to the object store once).
* Dependency paths: for every pair of (non-punctuation) tokens of a sentence, the POS tags
  along the dependency-tree path between them, in sentence order ("I love chicken" ->
  NOUN→VERB, VERB→NOUN, NOUN→VERB→NOUN with PRON read as the tagger gives it). A suite's
  number is the size of the union over its sentences. Higher is more diverse.

Both are computed on the same sample: ``per_group`` unique sentences per description
(seed 42 as the paper), so suites of different sizes compare fairly.
"""

from __future__ import annotations

import bisect
import random
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

BLEU_ORDER = 4
# Below this many sentences one process is faster than shipping work to Ray tasks (each
# task re-reads every sentence's n-grams; the per-hypothesis part is small).
PARALLEL_FROM = 50_000  # measured: 8,530 sentences take 5 s in one process, 7 s as 2 Ray tasks


def _bleu_scorer():
    from sacrebleu.metrics import BLEU

    return BLEU(max_ngram_order=BLEU_ORDER, effective_order=True)


def _corpus_ngrams(sentences: Sequence[str]):
    """Per sentence its n-gram counts and length (sacreBLEU's tokenizer and n-gram
    extraction), and per n-gram the highest count, who has it, and the second highest:
    the clipping count against "every sentence but i" is then one lookup, not a pass
    over n - 1 references."""
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    scorer = _bleu_scorer()
    grams, lens = [], []
    for s in sentences:
        g, n = extract_all_word_ngrams(scorer._preprocess_segment(s), 1, BLEU_ORDER)
        grams.append(g)
        lens.append(n)
    best: dict[tuple, list[int]] = {}  # n-gram -> [top count, its sentence, second count]
    for i, g in enumerate(grams):
        for ngram, c in g.items():
            b = best.get(ngram)
            if b is None:
                best[ngram] = [c, i, 0]
            elif c > b[0]:
                best[ngram] = [c, i, b[0]]
            elif c > b[2]:
                b[2] = c
    return scorer, grams, lens, best


def _closest_other_length(length: int, counts: Counter, sizes: list[int]) -> int:
    """sacreBLEU's closest reference length (ties: the shorter) among every sentence but
    one of this ``length``, by bisection over the sorted distinct lengths."""
    if counts[length] > 1:
        return length
    pos = bisect.bisect_left(sizes, length)
    below = sizes[pos - 1] if pos > 0 else None
    above_pos = pos + 1 if pos < len(sizes) and sizes[pos] == length else pos
    above = sizes[above_pos] if above_pos < len(sizes) else None
    if below is None:
        return above
    if above is None or length - below <= above - length:
        return below
    return above


def bleu_against_others(sentences: Sequence[str], indices: Sequence[int]) -> list[float]:
    """Sentence BLEU (0..1) of each ``sentences[i]`` against every other sentence: the same
    statistics and score as ``BLEU.sentence_score(sentences[i], others)`` (tested), with
    the references' n-grams merged once for all hypotheses."""
    scorer, grams, lens, best = _corpus_ngrams(sentences)
    if len(lens) < 2:
        return [0.0 for _ in indices]
    counts = Counter(lens)
    sizes = sorted(counts)
    out = []
    for i in indices:
        correct, total = [0] * BLEU_ORDER, [0] * BLEU_ORDER
        for ngram, count in grams[i].items():
            top, holder, second = best[ngram]
            total[len(ngram) - 1] += count
            correct[len(ngram) - 1] += min(count, top if holder != i else second)
        stats = [lens[i], _closest_other_length(lens[i], counts, sizes)] + correct + total
        out.append(scorer._compute_score_from_stats(stats).score / 100.0)
    return out


def self_bleu(
    sentences: Sequence[str], chunks: int | None = None, parallel: bool = True, min_parallel: int | None = None
) -> float:
    """Self-BLEU-4 of a list of sentences; nan for fewer than two. Ray tasks (``chunks``,
    default one per CPU) when Ray is up and there are ``min_parallel`` sentences or more."""
    sentences = list(sentences)
    n = len(sentences)
    if n < 2:
        return float("nan")
    import ray

    if not (parallel and ray.is_initialized() and n >= (PARALLEL_FROM if min_parallel is None else min_parallel)):
        return float(np.mean(bleu_against_others(sentences, range(n))))
    chunks = chunks or max(1, int(ray.cluster_resources().get("CPU", 1)))
    ref = ray.put(sentences)
    task = ray.remote(num_cpus=1)(bleu_against_others)
    parts = ray.get([task.remote(ref, idx.tolist()) for idx in np.array_split(np.arange(n), chunks)])
    return float(np.mean([s for part in parts for s in part]))


def token_paths(doc) -> set[str]:
    """POS sequences of the tree paths between every two non-punctuation tokens."""
    tokens = [t for t in doc if not t.is_punct and not t.is_space]
    ancestors = {t.i: [t.i] + [a.i for a in t.ancestors] for t in tokens}
    pos = {t.i: t.pos_ for t in doc}
    paths = set()
    for a_idx, a in enumerate(tokens):
        for b in tokens[a_idx + 1 :]:
            up, down = ancestors[a.i], ancestors[b.i]
            common = next((x for x in up if x in set(down)), None)
            if common is None:  # two sentences of one case: separate trees, no path
                continue
            path = up[: up.index(common) + 1] + list(reversed(down[: down.index(common)]))
            paths.add("→".join(pos[i] for i in path))
    return paths


def dependency_paths(sentences: Sequence[str], nlp) -> tuple[int, float]:
    """(unique paths over all sentences, mean unique paths per sentence)."""
    union: set[str] = set()
    per = []
    for doc in nlp.pipe(list(sentences), batch_size=128):
        p = token_paths(doc)
        union |= p
        per.append(len(p))
    return len(union), float(np.mean(per)) if per else float("nan")


def sample_per_group(groups: Mapping[str, Sequence[str]], per_group: int, seed: int = 42) -> list[str]:
    """Up to ``per_group`` unique sentences of each group (sorted keys, seeded sample)."""
    out = []
    for key in sorted(groups):
        unique = sorted(set(groups[key]))
        rng = random.Random(f"{seed}:{key}")
        out += unique if len(unique) <= per_group else rng.sample(unique, per_group)
    return out


def suite_diversity(groups: Mapping[str, Sequence[str]], nlp, per_group: int = 100, seed: int = 42) -> dict:
    """Table 5 row of one suite: Self-BLEU-4 and dependency paths on the same sample."""
    sample = sample_per_group(groups, per_group, seed)
    unique, mean = dependency_paths(sample, nlp)
    return {
        "sentences": len(sample),
        "self_bleu4": self_bleu(sample),
        "unique_dependency_paths": unique,
        "paths_per_sentence": mean,
    }
