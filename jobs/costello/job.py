"""The ``costello`` job: contrastive testing of embedding models (Jiang et al., FSE 2024).

    corpus -> seeds      (corpus sentences, inversion-table sentences, matching pairs;
                          classifier training sentences; the corpus dictionary)
           -> mutate     (Ray Data actor pool: spaCy POS + WordNet + lexicons)
           -> triples    (CR1-CR4, common test-case schema; + given suites, --triples)
           -> embed      (one Ray actor per embedding model, all in parallel; every
                          model's whole vocabulary is embedded for its thresholds;
                          through the content cache: only texts no run embedded)
           -> thresholds (nearest-neighbour distances over each whole dictionary, Ray actors)
           -> validate   (distances, adaptive thresholds, downstream-MLP Wilcoxon ground truth)

``checkray costello --corpus PATH --embedders FILE --out DIR`` publishes (``DIR/manifest.json``)
``triples.parquet`` (3 rows per triple), ``violations.parquet`` (model, triple, suite,
capability, distance, threshold, theta, d_pos, d_neg, verdict, gt_a, gt_b, p-values),
``thresholds.parquet``, ``costello.json`` (config and resolved embedders) and
``report.html``; and, for the re-test of ``checkray repair``, which reads only published
files: ``train.parquet`` (the classifiers' training sentences), ``dictionaries.parquet``
(each model's threshold dictionary) and ``classifiers.parquet`` (their accuracies).
``--triples FILE`` scores a given suite (released-triples JSON or suite Parquet) without
the mutation step.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import typer

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig, open_cache
from checkray.engine.case_checks import empty_rejected
from checkray.engine.corpus import corpus_fingerprint, read_corpus
from checkray.engine.costello.config import CostelloConfig, EmbedderSpec, MutationSettings
from checkray.engine.costello.mutations import (
    Variant,
    inversion_sentence_pairs,
    inversion_sentences,
    read_inversions,
)
from checkray.engine.costello.scoring import texts_to_embed
from checkray.engine.costello.triples import (
    Seed,
    assemble,
    counts_per_cr,
    rejected_inversion_pairs,
    rejected_variants,
    triple_table,
    triples_to_cases,
)
from checkray.engine.errors import InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.stages import Stage, StageContext, StageRunner, path_digest
from checkray.jobs.base import Job, JobResult, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.costello.inputs import (
    classifier_rows,
    dictionary_words,
    encoders_of_models,
    model_dictionaries,
    pick_seeds,
    read_corpora,
    read_embedders,
    read_pairs,
    repo_path,
)
from checkray.jobs.costello.repair import repair_after
from checkray.jobs.options import ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from checkray.jobs.zoo.resolve import select_models

__all__ = ["CostelloJob", "read_embedders", "repo_path", "run_costello"]


INVERSION_SEED = "inversion-"  # id prefix of seeds taken from the inversion table
SEED_SCHEMA = pa.schema(
    [("id", pa.string()), ("text", pa.string()), ("label", pa.string()), ("text_pair", pa.string())]
)


def _digests(*paths: str | None) -> tuple[str, ...]:
    """path_digest of every file input a stage reads (relative paths as the job resolves them)."""
    return tuple(path_digest(repo_path(p)) for p in paths if p)


def seeds_stage(cfg: CheckrayConfig, cc: CostelloConfig, seed: int) -> Stage:
    # Each stage sees only the fields it reads (Section.view): changing the verdict,
    # the classifiers or the report reruns validation, not mutation or embedding.
    cc = cc.view(
        "seeds",
        "inversions",
        "inversion_seeds",
        "inversion_unit",
        "inversion_grammar",
        "pairs",
        "classifier_train",
        "dictionary_size",
        "generate",
        "more_corpora",
    )

    def run(ctx: StageContext):
        corpus = read_corpora(cfg.corpus, cc.more_corpora)
        inv = (
            read_inversions(repo_path(cc.inversions), cc.inversion_unit, cc.inversion_grammar)
            if cc.inversions and cc.generate
            else None
        )
        idx = pick_seeds(corpus, cc.seeds, inv, seed) if cc.generate else np.array([], dtype=np.int64)
        seeds = corpus.take(pa.array(idx, pa.int64())).select(["id", "text", "label"])
        seeds = seeds.append_column("text_pair", pa.nulls(seeds.num_rows, pa.string()))
        parts = [seeds]
        if inv and cc.inversion_seeds:
            # The paper's CR3 seeds are the reference table's own sentences (IMDB reviews).
            have = {t.strip() for t in seeds.column("text").to_pylist()}
            table = inversion_sentences(repo_path(cc.inversions), cc.inversion_unit, cc.inversion_grammar)
            extra = [t for t in table if t not in have]
            parts.append(
                pa.table(
                    {
                        "id": pa.array([f"{INVERSION_SEED}{i}" for i in range(len(extra))], pa.string()),
                        "text": pa.array(extra, pa.string()),
                        "label": pa.nulls(len(extra), pa.string()),
                        "text_pair": pa.nulls(len(extra), pa.string()),
                    }
                )
            )
        if cc.pairs and cc.generate:
            parts.append(read_pairs(cfg.corpus, cc.pairs))
        train = classifier_rows(corpus, idx, cc.classifier_train, seed)
        words = dictionary_words(corpus.column("text").to_pylist(), cc.dictionary_size, seed)
        return {
            "seeds": pa.concat_tables([t.cast(SEED_SCHEMA) for t in parts]),
            "inversions_refused": refused_inversions(cc),
            "train": corpus.take(pa.array(train, pa.int64())).select(["id", "text", "label"]),
            "dictionary": pa.table({"word": pa.array(words, pa.string())}),
        }

    external = (
        (corpus_fingerprint(cfg.corpus),)
        + _digests(cc.inversions, *cc.more_corpora)
        + _digests(*(cc.pairs.paths() if cc.pairs else ()))
    )
    return Stage("seeds", run, config=[cc, cfg.corpus, seed], external=external)


def refused_inversions(cc: CostelloConfig) -> pa.Table:
    """The table's sentence pairs that its cut refused (``inversion_unit: sentence``), so the
    triples stage can publish them in ``rejected.parquet``; empty for whole texts."""
    from checkray.engine.costello.contrast_sentences import refused_table

    cut = cc.inversions and cc.generate and cc.inversion_unit == "sentence"
    return refused_table(inversion_sentence_pairs(repo_path(cc.inversions), cc.inversion_grammar) if cut else [])


def mutate_stage(cc: CostelloConfig, seed: int) -> Stage:
    cc = cc.view(
        "pipeline",
        "inversions",
        "inversion_unit",
        "inversion_grammar",
        "seed_grammar",
        "polarity_guard",
        "gender_pairs",
        "cr3_synonym",
        "context_checks",
        "substitutes",
    )

    def run(ctx: StageContext):
        from checkray.actors.costello.mutators import VARIANT_SCHEMA, mutate_corpus

        seeds = ctx.input("seeds", "seeds")
        if seeds.num_rows == 0:
            return {"data": VARIANT_SCHEMA.empty_table()}
        settings = MutationSettings(
            pipeline=cc.pipeline,
            inversions=repo_path(cc.inversions) if cc.inversions else None,
            inversion_unit=cc.inversion_unit,
            inversion_grammar=cc.inversion_grammar,
            seed_grammar=cc.seed_grammar,
            polarity_guard=cc.polarity_guard,
            gender_pairs=repo_path(cc.gender_pairs) if cc.gender_pairs else None,
            dense_seed=seed if cc.cr3_synonym == "dense" else None,
            context_checks=cc.context_checks,
            substitutes=cc.substitutes,
        )
        return {"data": mutate_corpus(seeds, settings, batch_size=64)}

    return Stage("mutate", run, inputs=("seeds",), config=[cc, seed], external=_digests(cc.inversions, cc.gender_pairs))


def fluency_stage(cc: CostelloConfig) -> Stage:
    """The mutate stage's variants with the LM fluency check applied (``engine/costello/fluency.py``)."""
    check = cc.fluency

    def run(ctx: StageContext):
        from checkray.actors.costello.mutators import VARIANT_SCHEMA
        from checkray.actors.lm_scorer import score_sentences
        from checkray.engine.costello.fluency import apply_fluency, sentences_to_score

        seeds = {r["id"]: (r["text"], r["text_pair"]) for r in ctx.input("seeds", "seeds").to_pylist()}
        rows = ctx.input("mutate").to_pylist()
        scores = score_sentences(
            sorted(sentences_to_score(rows, seeds, check.operators)), check.model, backend=check.backend
        )
        return {"data": pa.Table.from_pylist(apply_fluency(rows, seeds, scores, check), schema=VARIANT_SCHEMA)}

    return Stage("fluency", run, inputs=("seeds", "mutate"), config=[check])


def triples_stage(cc: CostelloConfig) -> Stage:
    variants_from = "fluency" if cc.fluency else "mutate"
    cc = cc.view("suite", "per_seed", "triples", "generate", "cr3_synonym", "context_checks")

    def run(ctx: StageContext):
        from checkray.engine.costello.released import read_triples

        parts = []
        rejected = empty_rejected()
        if cc.generate:
            seeds = [
                Seed(r["id"], r["text"], r["label"], r["text_pair"]) for r in ctx.input("seeds", "seeds").to_pylist()
            ]
            variants: dict[str, list[Variant]] = {}
            for r in ctx.input(variants_from).to_pylist():
                variants.setdefault(r.pop("seed_id"), []).append(Variant(**r))
            positive = "synonym_dense" if cc.cr3_synonym == "dense" else "synonym"
            cr2 = "shift" if cc.context_checks else "synonym"
            triples = assemble(seeds, variants, cc.suite, cc.per_seed, positive, cr2)
            rejected = pa.concat_tables(
                [
                    rejected_variants(seeds, variants, triples, cc.suite),
                    rejected_inversion_pairs(ctx.input("seeds", "inversions_refused"), cc.suite),
                ]
            )
            # Seeds taken from the inversion table (IMDB reviews for the paper) are there for CR3 only.
            triples = [t for t in triples if not t.seed.id.startswith(INVERSION_SEED) or t.capability == "CR3"]
            if not triples and not cc.triples:
                raise InputError(
                    "costello: no contrast triple could be built from the seeds (no adjective/verb "
                    "with a polarity-guarded synonym and antonym, no gendered word, no inversion hit)"
                )
            if triples:
                parts.append(triples_to_cases(triples, cc.suite))
        names = [cc.suite]
        for path in cc.triples:
            table = read_triples(repo_path(path))
            name = table.column("suite")[0].as_py()
            if name in names:
                raise InputError(f"{path}: suite name '{name}' is already used; rename the file")
            names.append(name)
            parts.append(table)
        if not parts:
            raise InputError("costello: nothing to score (generate is off and no triples file was given)")
        return {"data": pa.concat_tables(parts), "rejected": rejected}

    return Stage("triples", run, inputs=("seeds", variants_from), config=[cc], external=_digests(*cc.triples))


def embed_stage(
    cc: CostelloConfig, specs: Sequence[EmbedderSpec], seed: int, cache_cfg: CacheConfig | None = None
) -> Stage:
    cc = cc.view("dictionary", "dictionary_size", "dictionary_tokens", "backend", "batch_size")

    def run(ctx: StageContext):
        from checkray.actors.costello.embedders import embed_all
        from checkray.engine.arrays import embeddings_column

        dictionaries = model_dictionaries(specs, ctx.input("seeds", "dictionary"), cc, seed)
        texts = texts_to_embed(triple_table(ctx.input("triples")), ctx.input("seeds", "train"), dictionaries)
        # The content cache (any run, any --out): each model embeds only texts no run embedded with it.
        cache = open_cache(cache_cfg) if cache_cfg is None or cache_cfg.embeddings else None
        vectors = embed_all(texts, specs, cc.backend, cc.batch_size, cache=cache)
        out = {"texts": pa.table({"text": pa.array(texts, pa.string())}), "dictionaries": dictionaries}
        for name, matrix in vectors.items():
            out[f"emb-{name}"] = pa.table({"embedding": embeddings_column(matrix)})
        return out

    return Stage(
        "embed",
        run,
        inputs=("triples", "seeds"),
        config=[cc, list(specs), seed],
        external=_model_digests(specs),
    )


def _model_digests(specs: Sequence[EmbedderSpec]) -> tuple[str, ...]:
    """Local model directories (zoo models, paths) by path_digest; builtin/hub names by name."""
    from pathlib import Path

    return tuple(path_digest(s.model) if Path(s.model).exists() else s.model for s in specs)


def thresholds_stage(cc: CostelloConfig, specs: Sequence[EmbedderSpec]) -> Stage:
    """Nearest-neighbour distances over each model's whole dictionary (Ray actors)."""
    cc = cc.view("backend")

    def run(ctx: StageContext):
        from checkray.actors.costello.neighbours import dictionary_nn
        from checkray.engine.arrays import column_to_numpy
        from checkray.engine.costello.distances import DISTANCES

        texts = ctx.input("embed", "texts").column("text").to_pylist()
        index = {t: i for i, t in enumerate(texts)}
        dictionaries = ctx.input("embed", "dictionaries")
        matrices = {}
        for spec in specs:
            emb = column_to_numpy(ctx.input("embed", f"emb-{spec.name}").column("embedding"))
            words = dictionaries.filter(pc.equal(dictionaries["model"], spec.name)).column("word").to_pylist()
            matrices[spec.name] = emb[[index[w] for w in words]]
        nn = dictionary_nn(matrices, DISTANCES, cc.backend)
        return {f"nn-{name}": pa.table({m: pa.array(v) for m, v in per.items()}) for name, per in nn.items()}

    return Stage("thresholds", run, inputs=("embed",), config=[cc, [s.name for s in specs]])


def validate_stage(cc: CostelloConfig, specs: Sequence[EmbedderSpec], seed: int) -> Stage:
    def run(ctx: StageContext):
        from checkray.actors.costello.scoring import ModelInputs, score_models
        from checkray.engine.arrays import column_to_numpy

        wide = triple_table(ctx.input("triples"))
        texts = ctx.input("embed", "texts").column("text").to_pylist()
        train = ctx.input("seeds", "train")
        models = []
        for spec in specs:
            nn_table = ctx.input("thresholds", f"nn-{spec.name}")
            models.append(
                ModelInputs(
                    spec.name,
                    column_to_numpy(ctx.input("embed", f"emb-{spec.name}").column("embedding")),
                    {m: nn_table.column(m).to_numpy() for m in nn_table.column_names},
                )
            )
        parts, thr_rows, acc_rows = [], [], []
        for spec, score in zip(specs, score_models(models, texts, wide, train, cc, seed)):
            parts.append(score.violations)
            thr_rows += score.thresholds
            acc_rows += [{"model": spec.name, "classifier": i, "accuracy": a} for i, a in enumerate(score.accuracies)]
        return {
            "violations": pa.concat_tables(parts),
            "thresholds": pa.Table.from_pylist(thr_rows),
            "classifiers": pa.Table.from_pylist(
                acc_rows,
                schema=pa.schema([("model", pa.string()), ("classifier", pa.int64()), ("accuracy", pa.float64())]),
            ),
        }

    return Stage("validate", run, inputs=("triples", "seeds", "embed", "thresholds"), config=[cc, seed])


class CostelloJob(Job[CostelloConfig]):
    """seeds -> mutate -> triples -> embed -> thresholds -> validate. ``models``: a zoo registry's specs
    (or ``zoo``, its file) for ``zoo:<name>`` embedders."""

    name, title, section = "costello", "checkray · costello", CostelloConfig
    suite_file = "triples.parquet"
    published = (
        "triples.parquet",
        "violations.parquet",
        "thresholds.parquet",
        "costello.json",
        "train.parquet",
        "dictionaries.parquet",
        "classifiers.parquet",
        "rejected.parquet",
    )

    def __init__(
        self,
        cfg: CheckrayConfig,
        models: Sequence[ModelSpec] | None = None,
        zoo: str | None = None,
        model_encoders: bool = False,
    ):
        super().__init__(cfg, models)
        self.zoo = zoo
        self.model_encoders = model_encoders  # also test the encoders inside the models (checkray run)

    def check(self) -> None:
        from checkray.actors.costello.embedders import check_spec

        read_corpus(self.cfg.corpus)  # a bad corpus or label map fails before Ray starts
        self.models = select_models(self.models, self.zoo)
        self.embedders = read_embedders(self.conf.embedders, self.models or ())
        if self.model_encoders:
            self.embedders += encoders_of_models(self.models or (), self.embedders)
        for spec in self.embedders:
            check_spec(spec)
        if self.conf.fluency and self.conf.generate:
            from checkray.actors.llm.packaged import resolve_llm

            resolve_llm(self.conf.fluency.model)  # a missing model fails before Ray starts
        if (self.conf.inversion_grammar or self.conf.seed_grammar) and self.conf.generate:
            from checkray.engine.lang.link_grammar import require

            require()  # a missing parser fails before Ray starts

    def stages(self):
        cc, seed = self.conf, self.seed
        yield seeds_stage(self.cfg, cc, seed)
        yield mutate_stage(cc, seed)
        if cc.fluency:
            yield fluency_stage(cc)
        yield triples_stage(cc)
        yield embed_stage(cc, self.embedders, seed, self.cfg.section(CacheConfig))
        yield thresholds_stage(cc, self.embedders)
        yield validate_stage(cc, self.embedders, seed)

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from checkray.jobs.costello.report import costello_sections, rejected_section

        run = runner.run
        cases = runner.output("triples")
        violations = runner.output("validate", "violations")
        thresholds = runner.output("validate", "thresholds")
        classifiers = runner.output("validate", "classifiers")
        run.write_table("triples.parquet", cases)
        run.write_table("violations.parquet", violations)
        run.write_table("thresholds.parquet", thresholds)
        run.write_table("train.parquet", runner.output("seeds", "train"))
        run.write_table("dictionaries.parquet", runner.output("embed", "dictionaries"))
        run.write_table("classifiers.parquet", classifiers)
        rejected = runner.output("triples", "rejected")
        run.write_table("rejected.parquet", rejected)
        # What the run tested with, for the repair: the config and the resolved embedders.
        record = {"config": self.cfg.model_dump(mode="json"), "embedders": [s.model_dump() for s in self.embedders]}
        run.write_text("costello.json", json.dumps(record, indent=1))
        wide = triple_table(cases)
        return [rejected_section(rejected, wide.num_rows)] + costello_sections(
            wide, violations, thresholds, classifiers, self.conf
        )


def run_costello(cfg: CheckrayConfig, out: str, specs: Sequence[ModelSpec] = (), *, repair: bool = True) -> JobResult:
    """The whole job into ``out``; ``specs`` (a zoo registry) resolves ``zoo:<name>``
    embedders. With ``repair`` and ``repair.model`` set (the demo), a short repair of that
    model ("most-violated": the worst one) follows in ``out/repair`` and its sections are
    appended to the result's; a repair that cannot run (nothing violated ...) becomes a
    report line."""
    result = run_job(CostelloJob(cfg, list(specs)), out)
    if not repair:
        return result
    return dataclasses.replace(result, sections=result.sections + repair_after(cfg, result.run))


def costello_command(
    corpus: Optional[str] = typer.Option(
        None, "--corpus", help="Seed corpus (.parquet/.csv/.jsonl) or builtin:<name>."
    ),
    embedders: Optional[str] = typer.Option(None, "--embedders", help="YAML list of embedding models to test."),
    out: RunOut = None,
    config: ConfigFile = None,
    text_column: TextColumn = None,
    label_column: LabelColumn = None,
    labels: Labels = None,
    seeds: Optional[int] = typer.Option(None, "--seeds", help="Seed sentences to mutate."),
    triples: Optional[str] = typer.Option(
        None,
        "--triples",
        help="Score this suite instead of generating one: a released-triples JSON "
        "(relation -> [[seed, closer, farther]]) or a suite .parquet.",
    ),
    classifiers: Optional[int] = typer.Option(None, "--classifiers", help="Downstream MLPs per model (>= 5)."),
    zoo: Optional[str] = typer.Option(None, "--zoo", help="Zoo registry (zoo.yaml) for zoo:<name> embedders."),
):
    """Contrastive testing of embedding models (COSTELLO): triples, violations, report."""
    cfg = load_config(
        config,
        {
            **corpus_overrides(corpus, text_column, label_column, labels),
            "costello.embedders": embedders,
            "costello.seeds": seeds,
            "costello.classifiers": classifiers,
            "costello.triples": [triples] if triples else None,
            "costello.generate": False if triples else None,
            "out": out,
        },
    )
    result = run_job(CostelloJob(cfg, zoo=zoo))
    counts = counts_per_cr(triple_table(result.table("triples.parquet")))
    typer.echo(
        "costello: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f" triples -> {result.path('triples.parquet')}, violations.parquet, report.html"
    )
