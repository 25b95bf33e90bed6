"""Expansion actor for Ray Data ``map_batches``: seed sentences in; their parse, the
masked sentences Algorithm 1 finds (k sampled per seed) and the validated fills out.
Ranking maths and validation live in ``engine/s2lct/mask_fill.py``, Algorithm 1 in
``engine/s2lct/grammar.py``; this module holds the models (spaCy parser, spaCy vectors +
tagger, or an HF fill-mask model).

Filling backends (``engine/s2lct/fillers.FILLERS`` names them and their classes here):

* ``offline`` (``OfflineFiller``, default): candidates are corpus words with the mask's
  Penn tag, ranked by a bigram language-model score of the filled sentence (counted on
  the reference texts) plus the cosine of the word's ``builtin:md`` vector to its context.
  Chosen over scoring with the packaged Qwen 0.5B because it costs a dictionary lookup and
  one matrix product per mask: a llama.cpp forward pass per candidate sentence on 2 shared
  cores would take minutes for the demo's thousands of candidates instead of seconds.
* ``hf`` (``HFFiller``): a Hugging Face fill-mask model (an MLM head: BERT, RoBERTa ...)
  suggests words with probabilities, as in the paper. None ships offline; it is used when
  configured.

Both validate with the same spaCy pipeline: tag, lexicon polarity, rule re-check.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.lang.polarity import polar_sources, polarity_class
from checkray.engine.s2lct.config import FillerConfig, filler_backend
from checkray.engine.s2lct.fillers import FILLERS
from checkray.engine.s2lct.fluent import clear_corpus_polarity, polarity_reason
from checkray.engine.s2lct.grammar import MaskSampling
from checkray.engine.s2lct.mask_fill import (
    NEVER_INSERT,
    BigramLM,
    context_gram,
    context_reason,
    context_words,
    cosine_scores,
    denied_fill_reason,
    fill,
    modifier_reason,
    negators,
    neighbours,
    pick_fills,
    repeat_reason,
    validate_fill,
)
from checkray.engine.s2lct.reference import ReferenceGrammar
from checkray.engine.s2lct.spec import SearchRule

# spaCy's CNN tok2vec sees 4 tokens on each side (depth 4, window 1), so a tag depends on
# no more than that: validating a window of 8 tokens around the fill gives the same tag
# as the whole sentence at a fraction of the cost for long seeds.
TAG_WINDOW = 8
ATTESTED_BONUS = 20.0  # ranking bonus of a fill whose trigram the reference text has (outranks any LM gap)
RECORD_KEYS = ("masked", "tags", "production", "reference", "reference_count")

Ranked = list[tuple[float, list[str]]]  # (score, one word per mask), best first


class OfflineFiller:
    """Corpus words with the mask's tag, ranked by bigram LM + vector cosine."""

    def __init__(self, filler: FillerConfig, grammar: ReferenceGrammar, nlp, threads: int = 1):
        if not nlp.vocab.vectors.shape[0]:
            raise InputError(f"mask filler: spaCy pipeline {filler.pipeline} has no word vectors (use builtin:md)")
        self.nlp = nlp
        self.candidates, self.window, self.vector_weight = filler.candidates, filler.window, filler.vector_weight
        # Words an expansion may never insert (polar, negators, degree words, hedges ...)
        # are not candidates at all, so the best-ranked candidates are all insertable.
        words = {
            tag: [w for w, _ in entries if word_rejection([w]) is None and self.may_modify(w, tag, filler)]
            for tag, entries in grammar.vocabulary.items()
        }
        self.words = {tag: ws for tag, ws in words.items() if ws}
        self.vectors = {tag: np.stack([self.vector(w) for w in ws]) for tag, ws in self.words.items()}
        self.lm = BigramLM(grammar.unigrams, grammar.bigrams)
        self.trigrams = grammar.trigrams

    @classmethod
    def preflight(cls, filler: FillerConfig) -> None:
        """Nothing beyond the spaCy pipeline, which the job resolves for every backend."""

    @staticmethod
    def may_modify(word: str, tag: str, filler: FillerConfig) -> bool:
        """Whether the modifier check could keep ``word`` at all: an adjective must classify
        (``mask_fill.modifier_reason``), so judging ones are not candidates either."""
        from checkray.engine.lang.wordnet import is_classifying_adjective

        return not (filler.modifier_check and tag.startswith("JJ")) or is_classifying_adjective(word)

    def vector(self, word: str) -> np.ndarray:
        lex = self.nlp.vocab[word]
        return lex.vector if lex.has_vector else self.nlp.vocab[word.lower()].vector

    def rank(self, items: list[dict], tags: list[str]) -> Ranked:
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
            if self.trigrams:  # words the reference text uses in exactly this context first
                p = [i for i, it in enumerate(items) if "mask" in it][j]
                seen = [bool(self.trigrams.get(context_gram(items, p, w))) for w in self.words[tag]]
                scores = scores + ATTESTED_BONUS * np.array(seen)
            # A word equal to its neighbour ("a psychological psychological film") fits
            # the context vector best and says nothing new.
            same = {x.lower() for x in (prev, nxt) if x}
            scores[[w.lower() in same for w in self.words[tag]]] = -np.inf
            order = np.argsort(-scores, kind="stable")[: self.candidates]
            per_mask.append([(float(scores[i]), self.words[tag][i]) for i in order])
        return _combine(per_mask)


class HFFiller:
    """A transformers fill-mask model's suggestions, ranked by its probability."""

    def __init__(self, filler: FillerConfig, grammar: ReferenceGrammar, nlp, threads: int = 1):
        self.fill_mask = load_fill_mask(filler.hf_model, threads)
        self.candidates = filler.candidates

    @classmethod
    def preflight(cls, filler: FillerConfig) -> None:
        from checkray.actors.embedder import resolve_model

        if not filler.hf_model:
            raise InputError("mask filler 'hf': no model configured (s2lct.filler.hf_model)")
        resolve_model(filler.hf_model)

    def rank(self, items: list[dict], tags: list[str]) -> Ranked:
        token = self.fill_mask.tokenizer.mask_token
        text = "".join((token if "mask" in it else it["t"]) + it["ws"] for it in items).strip()
        out = self.fill_mask(text, top_k=self.candidates)
        per_mask = [out] if len(tags) == 1 else out
        per_mask = [
            [(float(c["score"]), c["token_str"].strip()) for c in cands if c["token_str"].strip().isalpha()]
            for cands in per_mask
        ]
        return _combine(per_mask)


def _combine(per_mask: list[list[tuple[float, str]]]) -> Ranked:
    """The i-th best word of every mask together, scored by their mean."""
    depth = min((len(c) for c in per_mask), default=0)
    return [(float(np.mean([c[i][0] for c in per_mask])), [c[i][1] for c in per_mask]) for i in range(depth)]


class Trial(NamedTuple):
    """One ranked fill of a masked sentence, ready to tag."""

    score: float
    words: list[str]
    text: str  # the filled sentence
    tag_text: str  # what is tagged: the sentence, or a window around the fills
    tag_offsets: list[int]  # character offsets of the filled words in ``tag_text``


@dataclass
class Masked:
    """One masked sentence of a seed (``found``: Algorithm 1's record) and its fills."""

    found: dict
    rule: SearchRule | None  # re-checked on every fill (LC1, LC2)
    polarity: str | None = None  # the seed sentence's polarity, re-checked on every fill
    denied_form: str | None = None  # the seed's form when its wrapper denies it whole (np, clause, past)
    fills: list[tuple[float, str, dict]] = field(default_factory=list)  # (score, words, fill record)
    rejected: Counter = field(default_factory=Counter)  # reason -> fills rejected
    refused: list[list[str]] = field(default_factory=list)  # [filled text, reason, detail] of each rejected fill

    def refuse(self, text: str, reason: str, detail: str = "") -> None:
        self.rejected[reason] += 1
        self.refused.append([text, reason, detail or reason])

    def record(self, keep: int) -> dict:
        """Its entry in the row's ``expansions`` JSON: the ``keep`` best valid fills."""
        fills = [f for _, _, f in pick_fills(self.fills, keep)]
        return {k: self.found[k] for k in RECORD_KEYS} | {
            "rejected": dict(self.rejected),
            "refused": self.refused,
            "fills": fills,
        }


class ExpansionActor:
    """Callable class for ``Dataset.map_batches``: ``case_id``, ``text`` and ``rule`` (JSON,
    or null) of seeds in; ``tokens``, ``tree``, ``parser``, ``masked_candidates`` and
    ``expansions`` (JSON: the sampled masked sentences with their kept fills) out."""

    def __init__(
        self,
        filler: FillerConfig,
        grammar: ReferenceGrammar,
        sampling: MaskSampling,
        *,
        parser_pipeline: str = "builtin:sm",
        parser: str = "auto",
        threads: int = 1,
        keep_columns: tuple[str, ...] = (),
        corpus_polarity: dict[str, float] | None = None,
    ):
        import spacy

        from checkray.actors.s2lct.parser import ParserActor
        from checkray.actors.spacy_nlp import resolve_pipeline

        self.parser = ParserActor(pipeline=parser_pipeline, parser=parser)
        self.nlp = spacy.load(resolve_pipeline(filler.pipeline), disable=["parser", "ner"])
        backend = FILLERS.record(filler_backend(filler))
        self.filler = FILLERS.get(backend.name)(filler, grammar, self.nlp, threads)
        self.min_score = filler.min_score if backend.lm_scored else None
        self.keep = filler.keep
        # The filled word must be attested next to both neighbours in the reference text.
        self.ngram_check, self.ngram_min_count = filler.ngram_check, filler.ngram_min_count
        self.modifier_check, self.compound_min_count = filler.modifier_check, filler.compound_min_count
        self.lm = BigramLM(grammar.unigrams, grammar.bigrams)
        self.trigrams = grammar.trigrams
        self.reference = grammar.productions
        self.sampling = sampling
        self.keep_columns = keep_columns
        self.corpus_polarity = corpus_polarity or {}

    def trials(self, items: list[dict], tags: list[str], *, whole: bool) -> list[Trial]:
        """The ranked fills of one masked sentence; ``whole``: tag the whole filled sentence
        (its rule is re-checked), else a window around the fills."""
        masks = [i for i, it in enumerate(items) if "mask" in it]
        window = items if whole else items[max(0, masks[0] - TAG_WINDOW) : masks[-1] + TAG_WINDOW + 1]
        out = []
        for score, words in self.filler.rank(items, tags):
            if not np.isfinite(score):
                continue
            text, offsets = fill(items, words)
            tag_text, tag_offsets = (text, offsets) if whole else fill(window, words)
            out.append(Trial(score, words, text, tag_text, tag_offsets))
        return out

    def screen(self, masked: Masked) -> list[Trial]:
        """The fills of a masked sentence worth tagging: polar words, negators and (offline)
        implausible scores are rejected before any tagging."""
        kept = []
        items = masked.found["items"]
        for trial in self.trials(items, masked.found["tags"], whole=masked.rule is not None):
            reason, detail = word_rejection(trial.words, self.corpus_polarity), ""
            if reason is None:
                detail = nationality_reason(items, trial.words) or ""
                reason = "identity" if detail else None
            if reason is None and self.ngram_check:
                for j, word in enumerate(trial.words):
                    detail = context_reason(items, j, word, self.lm, self.trigrams, self.ngram_min_count) or ""
                    if detail:
                        reason = "ngram"
                        break
            if reason is None:
                detail = repeat_reason(items, trial.words) or ""
                reason = "repeat" if detail else None
            if reason is None and self.modifier_check:
                detail = self.modifier_detail(items, masked.found["tags"], trial.words)
                reason = "modifier" if detail else None
            if reason is None and masked.denied_form:
                detail = denied_fill_reason(items, trial.words, masked.denied_form) or ""
                reason = "denied" if detail else None
            if reason is None and self.min_score is not None and trial.score < self.min_score:
                reason = "score"  # the paper keeps the suggestions its recommender is confident about
            if reason:
                masked.refuse(trial.text, reason, detail)
            else:
                kept.append(trial)
        return kept

    def modifier_detail(self, items: list[dict], tags: list[str], words: list[str]) -> str:
        """Why one of ``words`` would do more than restrict its noun ("" when none would)."""
        for j, (word, tag) in enumerate(zip(words, tags)):
            why = modifier_reason(items, j, word, tag, self.lm, self.compound_min_count)
            if why:
                return why
        return ""

    def validate(self, screened: list[tuple[Masked, Trial]]) -> None:
        """Tag every screened fill in one spaCy pass; keep those that pass the paper's checks."""
        docs = self.nlp.pipe([trial.tag_text for _, trial in screened], batch_size=256)
        for (masked, trial), doc in zip(screened, docs):
            toks = [{"t": t.text, "tag": t.tag_, "pos": t.pos_, "lemma": t.lemma_, "idx": t.idx} for t in doc]
            check = validate_fill(toks, trial.tag_offsets, trial.words, masked.found["tags"], masked.rule)
            why = polarity_reason(None, trial.text, masked.polarity) if check.ok and masked.polarity else None
            if check.ok and not why:
                record = {"text": trial.text, "words": trial.words, "score": trial.score}
                masked.fills.append((trial.score, " ".join(trial.words), record))
            elif why:
                masked.refuse(trial.text, "sentence-polarity", why)
            else:
                masked.refuse(trial.text, check.reason)

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch.to_pylist()
        tokens, trees = self.parser.parse([r["text"] for r in rows])
        found, per_row = [], []
        for row, toks, tree in zip(rows, tokens, trees):
            count, sampled = self.sampling.masked_sentences(tree, toks, self.reference, row["case_id"])
            rule = SearchRule.model_validate(json.loads(row["rule"])) if row.get("rule") else None
            found.append(count)
            per_row.append([Masked(m, rule, row.get("core_polarity"), row.get("denied_form")) for m in sampled])
        self.validate([(m, trial) for masked in per_row for m in masked for trial in self.screen(m)])
        if self.sampling.tries > 1:  # the first k masked sentences with a valid fill (all keep their refusals)
            per_row = [_first_k(masked, self.sampling.k, self.keep) for masked in per_row]
        expansions = [json.dumps([m.record(self.keep) for m in masked], ensure_ascii=False) for masked in per_row]
        cols = {name: batch.column(name) for name in self.keep_columns}
        cols.update(
            tokens=pa.array([json.dumps(t, ensure_ascii=False) for t in tokens], pa.string()),
            tree=pa.array(trees, pa.string()),
            parser=pa.array([self.parser.parser] * len(rows), pa.string()),
            masked_candidates=pa.array(found, pa.int64()),
            expansions=pa.array(expansions, pa.string()),
        )
        return pa.table(cols)


def _first_k(masked: list[Masked], k: int, keep: int) -> list[Masked]:
    """The first ``k`` masked sentences that got a valid fill; the others only for their refused fills."""
    out, kept = [], 0
    for m in masked:
        if m.fills and kept < k:
            kept += 1
            out.append(m)
        elif m.refused or m.fills:
            m.fills = []
            out.append(m)
    return out


def word_rejection(words: list[str], corpus_polarity: dict[str, float] | None = None) -> str | None:
    """Criterion 2 on the surface forms, before any tagging (the lemma is checked later):
    polar in any lexicon (VADER, AFINN, TextBlob) or, clearly (|value| >= 0.5), in the
    labeled corpora (``corpus_polarity``: "formulaic"), a negator, or a word that changes the
    claim without being polar (``NEVER_INSERT``: degree words, hedges, discourse markers),
    a profane or offensive word, or a word naming who a person is (``engine/lang/identity.py``)."""
    from checkray.engine.lang.identity import identity_word
    from checkray.engine.lang.profanity import offensive

    for word in words:
        if polarity_class(word) != "neutral" or polar_sources(word):
            return "polarity"
        if clear_corpus_polarity(word, corpus_polarity):
            return "polarity"
        if offensive(word):
            return "profanity"
        if identity_word(word):
            return "identity"
        if word.lower() in negators():
            return "negation"
        if word.lower() in NEVER_INSERT:
            return "function-word"
    return None


def nationality_reason(items: list[dict], words: list[str]) -> str | None:
    """A fill that puts a nationality before a person noun ("a [japanese] man")."""
    from checkray.engine.lang.identity import nationality_reason as before_person

    positions = [i for i, it in enumerate(items) if "mask" in it]
    for p, word in zip(positions, words, strict=False):
        after = items[p + 1] if p + 1 < len(items) else None
        why = before_person(word, after.get("t") if after and "mask" not in after else None)
        if why:
            return why
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
