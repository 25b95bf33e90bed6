"""Expansion actor for Ray Data ``map_batches``: seed sentences in; their parse, the
masked sentences Algorithm 1 finds (k sampled per seed) and the validated fills out.
Ranking maths and validation live in ``engine/s2lct/mask_fill.py``, Algorithm 1 in
``engine/s2lct/grammar.py``; this class holds the models (spaCy parser, spaCy vectors +
tagger, or an HF fill-mask model).

Filling backends:

* ``offline`` (default): candidates are corpus words with the mask's Penn tag, ranked by a
  bigram language-model score of the filled sentence (counted on the reference texts)
  plus the cosine of the word's ``builtin:md`` vector to its context. Chosen over scoring
  with the packaged Qwen 0.5B because it costs a dictionary lookup and one matrix product
  per mask: a llama.cpp forward pass per candidate sentence on 2 shared cores would take
  minutes for the demo's thousands of candidates instead of seconds.
* ``hf``: a Hugging Face fill-mask model (an MLM head: BERT, RoBERTa ...) suggests words
  with probabilities, as in the paper. None ships offline; it is used when configured.

Both validate with the same spaCy pipeline: tag, lexicon polarity, rule re-check.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.lang.polarity import polarity_class
from checkray.engine.s2lct.grammar import FILLABLE_TAGS, expansion_candidates, sample_masked
from checkray.engine.s2lct.mask_fill import (
    BigramLM,
    context_words,
    cosine_scores,
    fill,
    negators,
    neighbours,
    pick_fills,
    validate_fill,
)
from checkray.engine.s2lct.spec import SearchRule

# spaCy's CNN tok2vec sees 4 tokens on each side (depth 4, window 1), so a tag depends on
# no more than that: validating a window of 8 tokens around the fill gives the same tag
# as the whole sentence at a fraction of the cost for long seeds.
TAG_WINDOW = 8


class ExpansionActor:
    def __init__(
        self,
        reference: dict,
        vocabulary: dict,
        unigrams: dict | None = None,
        bigrams: list | None = None,
        parser_pipeline: str = "builtin:sm",
        parser: str = "auto",
        backend: str = "offline",
        pipeline: str = "builtin:md",
        hf_model: str | None = None,
        k: int = 4,
        max_masks: int = 1,
        candidates: int = 12,
        keep: int = 2,
        window: int = 3,
        vector_weight: float = 1.0,
        min_score: float | None = None,
        fillable: tuple[str, ...] | None = None,
        seed: int = 0,
        threads: int = 1,
        keep_columns: tuple[str, ...] = (),
    ):
        import spacy

        from checkray.actors.s2lct.parser import ParserActor
        from checkray.actors.spacy_nlp import resolve_pipeline

        self.parser = ParserActor(pipeline=parser_pipeline, parser=parser)
        self.nlp = spacy.load(resolve_pipeline(pipeline), disable=["parser", "ner"])
        self.reference = {lhs: [(tuple(rhs), n) for rhs, n in entries] for lhs, entries in reference.items()}
        self.backend, self.k, self.max_masks, self.seed = backend, k, max_masks, seed
        self.candidates, self.keep, self.window, self.vector_weight = candidates, keep, window, vector_weight
        self.keep_columns = keep_columns
        self.min_score = min_score if backend == "offline" else None
        self.fillable = set(fillable) if fillable else FILLABLE_TAGS
        if backend == "offline":
            if not self.nlp.vocab.vectors.shape[0]:
                raise InputError(f"mask filler: spaCy pipeline {pipeline} has no word vectors (use builtin:md)")
            self.words = {tag: [w for w, _ in entries] for tag, entries in vocabulary.items() if entries}
            self.vectors = {tag: np.stack([self.vector(w) for w in ws]) for tag, ws in self.words.items()}
            self.lm = BigramLM(unigrams or {}, {(a, b): n for a, b, n in bigrams or []})
        elif backend == "hf":
            self.fill_mask = load_fill_mask(hf_model, threads)
        else:
            raise InputError(f"mask filler: unknown backend '{backend}' (have: offline, hf)")

    def vector(self, word: str) -> np.ndarray:
        lex = self.nlp.vocab[word]
        return lex.vector if lex.has_vector else self.nlp.vocab[word.lower()].vector

    def rank_offline(self, items: list[dict], tags: list[str]) -> list[tuple[float, list[str]]]:
        """Word combinations, best first: the i-th best word for every mask."""
        per_mask = []
        for j, tag in enumerate(tags):
            if tag not in self.vectors:
                return []
            ctx = [v for v in (self.vector(w) for w in context_words(items, j, self.window)) if np.any(v)]
            context = np.mean(ctx, axis=0) if ctx else np.zeros(self.vectors[tag].shape[1], np.float32)
            prev, nxt = neighbours(items, j)
            lm = np.array([self.lm.local_logprob(prev, w, nxt) for w in self.words[tag]])
            scores = lm + self.vector_weight * cosine_scores(self.vectors[tag], context)
            # A word equal to its neighbour ("a psychological psychological film") fits
            # the context vector best and says nothing new.
            same = {x.lower() for x in (prev, nxt) if x}
            scores[[w.lower() in same for w in self.words[tag]]] = -np.inf
            order = np.argsort(-scores, kind="stable")[: self.candidates]
            per_mask.append([(float(scores[i]), self.words[tag][i]) for i in order])
        depth = min(len(c) for c in per_mask)
        return [(float(np.mean([c[i][0] for c in per_mask])), [c[i][1] for c in per_mask]) for i in range(depth)]

    def rank_hf(self, items: list[dict], tags: list[str]) -> list[tuple[float, list[str]]]:
        token = self.fill_mask.tokenizer.mask_token
        text = "".join((token if "mask" in it else it["t"]) + it["ws"] for it in items).strip()
        out = self.fill_mask(text, top_k=self.candidates)
        per_mask = [out] if len(tags) == 1 else out
        per_mask = [
            [(float(c["score"]), c["token_str"].strip()) for c in cands if c["token_str"].strip().isalpha()]
            for cands in per_mask
        ]
        depth = min((len(c) for c in per_mask), default=0)
        return [(float(np.mean([c[i][0] for c in per_mask])), [c[i][1] for c in per_mask]) for i in range(depth)]

    def trials(
        self, items: list[dict], tags: list[str], whole: bool
    ) -> list[tuple[float, list[str], str, list[int], str, list[int]]]:
        """(score, words, full text, offsets, text to tag, offsets in it) per ranked candidate."""
        ranked = self.rank_offline(items, tags) if self.backend == "offline" else self.rank_hf(items, tags)
        masks = [i for i, it in enumerate(items) if "mask" in it]
        window = items if whole else items[max(0, masks[0] - TAG_WINDOW) : masks[-1] + TAG_WINDOW + 1]
        out = []
        for score, words in ranked:
            if not np.isfinite(score):
                continue
            text, offsets = fill(items, words)
            tag_text, tag_offsets = (text, offsets) if whole else fill(window, words)
            out.append((score, words, text, offsets, tag_text, tag_offsets))
        return out

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        tokens, trees = self.parser.parse([r["text"] for r in rows])
        jobs = []  # (row, masked record, trial)
        found = []
        masked_by_row: dict[int, list[dict]] = {}
        for r, (row, toks, tree) in enumerate(zip(rows, tokens, trees)):
            cands = expansion_candidates(tree, toks, self.reference, self.fillable, self.max_masks) if toks else []
            found.append(len(cands))
            rule = SearchRule.model_validate(json.loads(row["rule"])) if row.get("rule") else None
            for m in sample_masked(cands, self.k, random.Random(f"{self.seed}:{row['case_id']}")):
                m = {**m, "fills": [], "rejected": {}, "rule": rule}
                masked_by_row.setdefault(r, []).append(m)
                for trial in self.trials(m["items"], m["tags"], whole=rule is not None):
                    reason = word_rejection(trial[1])
                    if reason is None and self.min_score is not None and trial[0] < self.min_score:
                        reason = "score"  # the paper keeps the suggestions its recommender is confident about
                    if reason:
                        m["rejected"][reason] = m["rejected"].get(reason, 0) + 1
                        continue
                    jobs.append((r, m, trial))
        docs = self.nlp.pipe([t[4] for _, _, t in jobs], batch_size=256)
        for (_row, m, (score, words, text, _, _, tag_offsets)), doc in zip(jobs, docs):
            toks = [{"t": t.text, "tag": t.tag_, "pos": t.pos_, "lemma": t.lemma_, "idx": t.idx} for t in doc]
            check = validate_fill(toks, tag_offsets, words, m["tags"], m["rule"])
            if check.ok:
                m["fills"].append((score, " ".join(words), {"text": text, "words": words, "score": score}))
            else:
                m["rejected"][check.reason] = m["rejected"].get(check.reason, 0) + 1
        expansions = []
        for r in range(len(rows)):
            records = []
            for m in masked_by_row.get(r, []):
                fills = [f for _, _, f in pick_fills(m["fills"], self.keep)]
                records.append(
                    {k: m[k] for k in ("masked", "tags", "production", "reference", "reference_count", "rejected")}
                    | {"fills": fills}
                )
            expansions.append(json.dumps(records, ensure_ascii=False))
        cols = {name: batch.column(name) for name in self.keep_columns}
        cols.update(
            tokens=pa.array([json.dumps(t, ensure_ascii=False) for t in tokens], pa.string()),
            tree=pa.array(trees, pa.string()),
            parser=pa.array([self.parser.parser] * len(rows), pa.string()),
            masked_candidates=pa.array(found, pa.int64()),
            expansions=pa.array(expansions, pa.string()),
        )
        return pa.table(cols)


def word_rejection(words: list[str]) -> str | None:
    """Criterion 2 on the surface forms, before any tagging (the lemma is checked later)."""
    for word in words:
        if polarity_class(word) != "neutral":
            return "polarity"
        if word.lower() in negators():
            return "negation"
    return None


def load_fill_mask(model: str | None, threads: int = 1):
    """A transformers fill-mask pipeline; one-line error when it cannot load."""
    if not model:
        raise InputError("mask filler 'hf': no model configured (s2lct.filler.hf_model)")
    import torch
    from transformers import pipeline

    from checkray.actors.embedder import resolve_model

    torch.set_num_threads(max(1, threads))
    try:
        return pipeline("fill-mask", model=resolve_model(model), device=-1)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"mask filler 'hf': cannot load fill-mask model {model}: {first}") from None
