"""The stages that make the S²LCT suite, and the glue they share with the evaluation stages.

parse    one Ray Data pass of ParserActors (spaCy + dep->constituency or benepar) over the
         searched corpus, where the capabilities' search rules run too, and the reference texts
grammar  reference CFG (productions with counts), candidate vocabulary, bigram counts
seeds    the capabilities' transformation templates over the sentences each rule found
expand   one Ray Data pass of ExpansionActors: parse each seed, Algorithm 1 (k masked
         sentences per seed), fill the masks, validate (tag, polarity, rule)
suite    seeds and expansions as test cases (suite.parquet)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.case_checks import rejected_table
from checkray.engine.config import CorpusConfig
from checkray.engine.corpus import corpus_fingerprint, read_corpus
from checkray.engine.errors import InputError
from checkray.engine.label_classifier import cross_fitted_confidence
from checkray.engine.runtime import cluster_resources, plan_actor_pool
from checkray.engine.s2lct.confidence import LabelConfidence
from checkray.engine.s2lct.config import ReferenceSource, S2lctConfig, filler_backend, filler_name
from checkray.engine.s2lct.fillers import FILLERS
from checkray.engine.s2lct.fluent import corpus_polar_words
from checkray.engine.s2lct.grammar import FILLABLE_TAGS, MaskSampling, count_productions, grammar_table
from checkray.engine.s2lct.reference import filler_tables, reference_grammar
from checkray.engine.s2lct.search import CorpusSearch, checked_seed_rows
from checkray.engine.s2lct.spec import CapabilitySpec, capability_files
from checkray.engine.s2lct.suite import suite_table
from checkray.engine.stages import Stage, StageContext, path_digest
from checkray.jobs.config import CheckrayConfig

# Fields only the evaluation stages read: they can change without regenerating the suite.
EVALUATION_FIELDS = ("models", "only_models", "coverage", "explain", "consistency")


# Below these row counts a one-node CPU Ray maps in the driver: a pool costs more than it
# saves. An expansion actor takes ~9 s to start (spaCy, WordNet, the filler's word table)
# and then ~20 ms a seed, so two actors gain on one process only past ~500 seeds; the
# demo's parse (2,100 sentences) took 10.4 s in the driver and 14.9 s on two actors.
EXPAND_IN_DRIVER_BELOW = 400
PARSE_IN_DRIVER_BELOW = 3_000


def ray_map(
    table: pa.Table, actor, kwargs: dict, s: S2lctConfig, batch_size: int | None = None, in_driver_below: int = 0
) -> pa.Table:
    """``table`` through a pool of ``actor``s (one per CPU by default: spaCy is
    single-threaded); one output row per input row, in input order. Fewer than
    ``in_driver_below`` rows on a one-node CPU Ray run in this process instead
    (``runtime.embed_in_driver_below: 0`` turns that off, as for encoders)."""
    from checkray.actors.embed_cache import small_work_plan
    from checkray.actors.pool import map_with_actors

    resources = cluster_resources()
    plan = plan_actor_pool(resources, "cpu", s.pool_size or max(1, int(resources.get("CPU", 1))))
    if not s.pool_size:  # a pool size the user set is a pool
        plan = small_work_plan(plan, table.num_rows, in_driver_below, "cpu")
    return map_with_actors(table, actor, kwargs, plan, batch_size=batch_size or s.batch_size)


def preflight(s: S2lctConfig) -> None:
    """Errors the actors would hit, raised in the driver before any actor starts."""
    from checkray.actors.spacy_nlp import resolve_pipeline

    resolve_pipeline(s.pipeline)
    resolve_pipeline(s.filler.pipeline)
    if s.parser == "benepar":
        try:
            import benepar

            benepar.Parser("benepar_en3")
        except Exception:
            raise InputError(
                "s2lct.parser is 'benepar' but benepar or its model benepar_en3 is not installed (use parser: auto)"
            ) from None
    FILLERS.get(filler_backend(s.filler)).preflight(s.filler)


def file_digests(paths: Sequence[str | None]) -> tuple[str, ...]:
    """Content digests of the ``paths`` that exist on disk (hub ids, ``builtin:`` names,
    ``module:function`` refs and None are named by the config instead)."""
    return tuple(path_digest(p) for p in dict.fromkeys(p for p in paths if p and os.path.exists(p)))


def model_digests(registry: str | None, models: Sequence[ModelSpec]) -> tuple[str, ...]:
    """Fingerprints of the model files a stage's models come from: the registry file and
    every model path on disk."""
    return file_digests([registry, *(sp.path for sp in models)])


def read_reference(src: ReferenceSource, seed: int) -> list[str]:
    table = read_corpus(
        CorpusConfig(path=src.path, text_column=src.text_column, label_column=None, sample=src.sample, sample_seed=seed)
    )
    # IMDB reviews carry HTML line breaks.
    return [re.sub(r"<br\s*/?>", " ", t) for t in table.column("text").to_pylist()]


def search_corpus_config(cfg: CheckrayConfig, s: S2lctConfig, seed: int) -> CorpusConfig:
    if not s.search_sample or cfg.corpus.sample:
        return cfg.corpus
    return cfg.corpus.model_copy(update={"sample": s.search_sample, "sample_seed": seed})


def parse_stage(cfg: CheckrayConfig, s: S2lctConfig, specs: list[CapabilitySpec], seed: int) -> Stage:
    """One Ray Data pass of parser actors over the searched corpus (parse + search rules)
    and the reference texts (parse only)."""
    corpus_cfg = search_corpus_config(cfg, s, seed)
    spec_digest = [path_digest(str(f)) for f in capability_files(s.capabilities or None)]
    # Reference corpora read from files are inputs too (builtin ones are named by their path).
    ref_digest = (
        [] if s.grammar_file else [path_digest(r.path) for r in s.reference if not r.path.startswith("builtin:")]
    )
    # Parsing is the slow step: it sees (and fingerprints) only the fields it reads, so a
    # change of expansion or evaluation settings reuses it.
    s = s.view(
        "pipeline",
        "parser",
        "neutral_proxy",
        "neutral_label",
        "grammar_file",
        "reference",
        "capabilities",
        "pool_size",
        "batch_size",
    )

    def run(ctx: StageContext):
        from checkray.actors.s2lct.parser import ParserActor

        corpus = read_corpus(corpus_cfg)
        labels = set(corpus.column("label").to_pylist())
        if labels == {None}:
            raise InputError(f"{corpus_cfg.path}: S2LCT needs a labeled corpus (the label column is empty)")
        proxy = s.neutral_proxy and s.neutral_label not in labels
        reference = [] if s.grammar_file else [t for src in s.reference for t in read_reference(src, seed)]
        n = corpus.num_rows
        table = pa.table(
            {
                "id": corpus.column("id").to_pylist() + [f"reference-{i}" for i in range(len(reference))],
                "text": corpus.column("text").to_pylist() + reference,
                "label": corpus.column("label").to_pylist() + [None] * len(reference),
                "role": ["search"] * n + ["reference"] * len(reference),
            }
        )
        search = CorpusSearch(tuple(specs), neutral_proxy=proxy, neutral_label=s.neutral_label)
        kwargs = dict(pipeline=s.pipeline, parser=s.parser, keep=("id", "text", "label"), search=search)
        parsed = ray_map(table, ParserActor, kwargs, s, in_driver_below=PARSE_IN_DRIVER_BELOW)
        return {
            "search": parsed.slice(0, n),
            "reference": parsed.slice(n).select(["tokens", "tree"]),
            "info": pa.table({"neutral_proxy": [proxy], "reference_documents": [len(reference)]}),
        }

    return Stage(
        "parse", run, config=[s, corpus_cfg, seed], external=(corpus_fingerprint(corpus_cfg), *spec_digest, *ref_digest)
    )


def generation_view(s: S2lctConfig):
    """The fields the generating stages read: evaluation settings (models, coverage,
    consistency ...) can change without regenerating the suite."""
    return s.view(*(name for name in type(s).model_fields if name not in EVALUATION_FIELDS))


def grammar_stage(s: S2lctConfig) -> Stage:
    """Reference CFG (productions with counts), candidate vocabulary per Penn tag, and the
    bigram counts the offline filler's LM score uses."""
    s = generation_view(s)

    def run(ctx: StageContext):
        parts = [ctx.input("parse", "reference")]
        if s.reference_includes_corpus:
            parts.append(ctx.input("parse", "search", columns=["tokens", "tree"]))
        trees = [t for p in parts for t in p.column("tree").to_pylist()]
        if not trees and not s.grammar_file:
            raise InputError("s2lct: empty reference corpus (set s2lct.reference or reference_includes_corpus)")
        token_lists = [json.loads(t) for p in parts for t in p.column("tokens").to_pylist()]
        grammar = read_grammar(s.grammar_file) if s.grammar_file else grammar_table(count_productions(trees))
        return {
            "data": grammar,
            **filler_tables(
                token_lists,
                s.filler.vocabulary_per_tag,
                s.filler.vocabulary_min_count,
                (t for src in s.ngram_reference for t in read_reference(src, 0)),
            ),
            "sources": pa.table({"trees": [len(trees)]}),
        }

    return Stage(
        "grammar", run, inputs=("parse",), config=[s], external=(path_digest(s.grammar_file),) if s.grammar_file else ()
    )


def read_grammar(path: str) -> pa.Table:
    """A grammar.parquet saved by an earlier run; one-line error when it is not one."""
    import pyarrow.parquet as pq

    from checkray.engine.s2lct.grammar import GRAMMAR_SCHEMA

    if not Path(path).is_file():
        raise InputError(f"{path}: grammar file not found")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: unreadable grammar file: {str(exc).splitlines()[0]}") from None
    if table.column_names != GRAMMAR_SCHEMA.names:
        raise InputError(f"{path}: a grammar has columns {GRAMMAR_SCHEMA.names}, got {table.column_names}")
    return table.cast(GRAMMAR_SCHEMA)


def labeled_polarity(s: S2lctConfig, searched: pa.Table) -> dict[str, float]:
    """Words the labeled corpora use mostly in one label (``corpus_polar_words``): the
    searched corpus and ``s2lct.polarity_corpora`` (default: the bundled Rotten Tomatoes
    sentences); neutral seeds may not contain them."""
    texts, labels = list(searched.column("text").to_pylist()), list(searched.column("label").to_pylist())
    for path in s.polarity_corpora:
        table = read_corpus(CorpusConfig(path=path))  # bundled corpora name their labels
        texts += table.column("text").to_pylist()
        labels += [str(x) for x in table.column("label").to_pylist()]
    return corpus_polar_words(texts, labels)


def label_check_on(s: S2lctConfig) -> bool:
    """Whether the seeds are checked against a cross-fitted classifier (fluent wrappers only:
    the paper's wording checks nothing)."""
    return s.wrappers == "fluent" and s.label_check.encoder is not None


def confidence_stage(s: S2lctConfig, seed: int, cache_cfg: CacheConfig | None = None) -> Stage:
    """How surely each searched sentence carries its corpus label: its embedding (the
    embedder actors, through the content cache) scored by a cross-fitted logistic
    regression (``engine/s2lct/confidence.py``)."""
    check = s.label_check

    def run(ctx: StageContext):
        from checkray.actors.embed_cache import cluster_plan, embed_texts, sentence_model
        from checkray.actors.embedder import resolve_model

        resolve_model(check.encoder)  # a missing model path fails here, not inside an actor
        searched = ctx.input("parse", "search", columns=["id", "text", "label"])
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None
        model = sentence_model(check.encoder, normalize=True)
        vectors = embed_texts(
            searched.column("text").to_pylist(), model, cache=cache, plan=cluster_plan(texts=searched.num_rows)
        )
        labels = searched.column("label").to_pylist()
        p = cross_fitted_confidence(vectors, labels, folds=check.folds, seed=seed)
        table = pa.table({"id": searched.column("id"), "label": searched.column("label"), "confidence": p})
        return {"data": table}

    return Stage("confidence", run, inputs=("parse",), config=[check, seed])


def label_confidence(table: pa.Table, threshold: float) -> LabelConfidence:
    ids, labels = table.column("id").to_pylist(), table.column("label").to_pylist()
    scores = zip(labels, table.column("confidence").to_pylist())
    return LabelConfidence(dict(zip(ids, scores)), threshold)


def seeds_stage(specs: list[CapabilitySpec], s: S2lctConfig, seed: int) -> Stage:
    s = generation_view(s)
    checked = label_check_on(s)

    def run(ctx: StageContext):
        proxy = bool(ctx.input("parse", "info").column("neutral_proxy")[0].as_py())
        searched = ctx.input("parse", "search")
        polarity = labeled_polarity(s, searched) if s.wrappers == "fluent" else {}
        confidence = label_confidence(ctx.input("confidence"), s.label_check.min_confidence) if checked else None
        rows, rejected = checked_seed_rows(
            specs,
            searched,
            suite=s.suite,
            max_seeds=s.max_seeds,
            seed=seed,
            neutral_proxy=proxy,
            neutral_label=s.neutral_label,
            wrappers=s.wrappers,
            corpus_polarity=polarity or None,
            confidence=confidence,
        )
        if not rows:
            raise InputError("s2lct: no sentence of the corpus matches any capability's search rules")
        # The expansions read the same word polarities: computed once, published here.
        polarity_table = pa.table(
            {"word": pa.array(list(polarity), pa.string()), "value": pa.array(list(polarity.values()), pa.float64())}
        )
        return {"data": pa.Table.from_pylist(rows), "rejected": rejected_table(rejected), "polarity": polarity_table}

    return Stage("seeds", run, inputs=("parse", "confidence") if checked else ("parse",), config=[s, seed, list(specs)])


def expand_stage(s: S2lctConfig, seed: int) -> Stage:
    """Ray Data pass of expansion actors: parse each seed, Algorithm 1, fill, validate."""
    s = generation_view(s)

    def run(ctx: StageContext):
        from checkray.actors.s2lct.mask_filler import ExpansionActor

        grammar = reference_grammar(
            *(ctx.input("grammar", output) for output in ("data", "vocabulary", "unigrams", "bigrams")),
            min_count=s.grammar_min_count,
            trigrams=ctx.input("grammar", "trigrams"),
        )
        sampling = MaskSampling(
            k=s.k,
            max_masks=s.max_masks,
            fillable=frozenset(s.fillable_tags or FILLABLE_TAGS),
            seed=seed,
            tries=s.mask_tries,
        )
        # Words the labeled corpora use in one label ("formulaic") are polar though no lexicon
        # says so (the seeds stage's table; empty with the paper's wrappers).
        polarity = ctx.input("seeds", "polarity")
        kwargs = dict(
            filler=s.filler,
            grammar=grammar,
            sampling=sampling,
            parser_pipeline=s.pipeline,
            parser=s.parser,
            keep_columns=("case_id",),
            corpus_polarity=dict(zip(polarity.column("word").to_pylist(), polarity.column("value").to_pylist())),
        )
        # The expansion inserts into the seed sentence (``core``), never into the wrapper.
        seeds = ctx.input("seeds", columns=["case_id", "core", "rule", "core_polarity", "denied_form"])
        seeds = seeds.rename_columns(["case_id", "text", "rule", "core_polarity", "denied_form"])
        return {
            "data": ray_map(seeds, ExpansionActor, kwargs, s, batch_size=16, in_driver_below=EXPAND_IN_DRIVER_BELOW)
        }

    return Stage("expand", run, inputs=("seeds", "grammar"), config=[s, seed])


def suite_stage(s: S2lctConfig, seed: int) -> Stage:
    """Seeds and their validated expansions as test cases (suite.parquet)."""
    filler = filler_name(s.filler)

    def run(ctx: StageContext):
        suite, rejected = suite_table(ctx.input("seeds"), ctx.input("expand"), filler, seed, with_rejected=True)
        return {"data": suite, "rejected": pa.concat_tables([ctx.input("seeds", "rejected"), rejected])}

    return Stage("suite", run, inputs=("seeds", "expand"), config=[filler, seed])
