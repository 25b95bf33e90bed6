"""The ``s2lct`` job (S²LCT): specification-based seeds, syntax-based expansions.

parse    one Ray Data pass of ParserActors (spaCy + dep->constituency or benepar) over the
         searched corpus, where the capabilities' search rules run too, and the reference texts
grammar  reference CFG (productions with counts), candidate vocabulary, bigram counts
seeds    the capabilities' transformation templates over the sentences each rule found
expand   one Ray Data pass of ExpansionActors: parse each seed, Algorithm 1 (k masked
         sentences per seed), fill the masks, validate (tag, polarity, rule)

Outputs in ``--out DIR``: suite.parquet (seeds + expansions, common schema),
grammar.parquet, report.html; with ``--models`` also the benchmark (DIR/benchmark/),
table3.parquet, coverage.parquet (see jobs/s2lct/evaluate.py). Stages are checkpointed
under DIR/stages/, so a rerun resumes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import pyarrow as pa
import typer

from checkray.engine.benchmark.registry import ModelSpec
from checkray.engine.cache import CacheConfig
from checkray.engine.config import CorpusConfig
from checkray.engine.corpus import corpus_fingerprint, read_corpus
from checkray.engine.errors import InputError
from checkray.engine.report import Section as ReportSection
from checkray.engine.runtime import cluster_resources, plan_actor_pool
from checkray.engine.s2lct.grammar import count_productions, grammar_table, reference_index
from checkray.engine.s2lct.mask_fill import build_vocabulary, count_ngrams
from checkray.engine.s2lct.search import METHOD, build_seeds
from checkray.engine.s2lct.spec import (
    CapabilitySpec,
    LabelNote,
    capability_files,
    check_corpus_labels,
    load_capabilities,
)
from checkray.engine.s2lct.suite import suite_table
from checkray.engine.schema import case_id
from checkray.engine.stages import RunDir, Stage, StageContext, StageRunner, path_digest
from checkray.jobs.base import Job, run_job
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.console import console
from checkray.jobs.options import ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from checkray.jobs.s2lct.config import ReferenceSource, S2lctConfig, filler_backend, filler_name
from checkray.jobs.s2lct.consistency import consistency_stage
from checkray.jobs.zoo.resolve import select_models

SUITE_FILE, GRAMMAR_FILE, REPORT_FILE = "suite.parquet", "grammar.parquet", "report.html"
CONSISTENCY_FILE = "consistency.parquet"


def ray_map(table: pa.Table, actor, kwargs: dict, s: S2lctConfig, batch_size: int | None = None) -> pa.Table:
    """``table`` through a pool of ``actor``s (one per CPU by default: spaCy is
    single-threaded); one output row per input row, in input order."""
    from checkray.actors.pool import map_with_actors

    resources = cluster_resources()
    plan = plan_actor_pool(resources, "cpu", s.pool_size or max(1, int(resources.get("CPU", 1))))
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
    if filler_backend(s.filler) == "hf":
        from checkray.actors.embedder import resolve_model

        resolve_model(s.filler.hf_model)


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
        kwargs = dict(
            pipeline=s.pipeline,
            parser=s.parser,
            keep=("id", "text", "label"),
            specs=[sp.model_dump(mode="json") for sp in specs],
            neutral_proxy=proxy,
            neutral_label=s.neutral_label,
        )
        parsed = ray_map(table, ParserActor, kwargs, s)
        return {
            "search": parsed.slice(0, n),
            "reference": parsed.slice(n).select(["tokens", "tree"]),
            "info": pa.table({"neutral_proxy": [proxy], "reference_documents": [len(reference)]}),
        }

    return Stage(
        "parse", run, config=[s, corpus_cfg, seed], external=(corpus_fingerprint(corpus_cfg), *spec_digest, *ref_digest)
    )


EVALUATION_FIELDS = ("models", "only_models", "coverage", "explain", "consistency")


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
        vocab = build_vocabulary(token_lists, s.filler.vocabulary_per_tag, s.filler.vocabulary_min_count)
        words = {w.lower() for entries in vocab.values() for w, _ in entries}
        uni, bi = count_ngrams(token_lists, keep=words)
        grammar = read_grammar(s.grammar_file) if s.grammar_file else grammar_table(count_productions(trees))
        return {
            "data": grammar,
            "vocabulary": pa.Table.from_pylist(
                [{"tag": tag, "word": w, "count": c} for tag, entries in vocab.items() for w, c in entries]
            ),
            "unigrams": pa.table({"word": list(uni), "count": pa.array(list(uni.values()), pa.int64())}),
            "bigrams": pa.table(
                {"a": [a for a, _ in bi], "b": [b for _, b in bi], "count": pa.array(list(bi.values()), pa.int64())}
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


def seed_rows(specs: list[CapabilitySpec], searched: pa.Table, s: S2lctConfig, seed: int, proxy: bool) -> list[dict]:
    """Seeds of every capability (not yet parsed) from the search rules' matches."""
    rows = searched.select(["id", "matches", "tokens"]).to_pylist()
    out = []
    for spec in specs:
        found: dict[str, list[dict]] = {}
        for row in rows:
            for rule in json.loads(row["matches"]).get(spec.id, []):
                found.setdefault(rule, []).append({"id": row["id"], "tokens": json.loads(row["tokens"])})
        neutral_rules = {r.name for r in spec.search if r.label == s.neutral_label}
        for sd in build_seeds(spec, found, s.max_seeds, seed):
            suite = f"{s.suite}-{spec.id}"
            # LC1/LC2 expansions must satisfy the rule that found their seed again.
            rule = spec.rule(sd["rules"][0]) if spec.recheck_rule and not spec.transforms else None
            out.append(
                {
                    "case_id": case_id(METHOD, suite, sd["text"], sd["label"]),
                    "capability_id": spec.id,
                    "capability": spec.name,
                    "suite": suite,
                    "text": sd["text"],
                    "label": sd["label"],
                    "sources": json.dumps(sd["sources"]),
                    "rules": json.dumps(sd["rules"]),
                    "template_id": sd["template_id"],
                    "accepts": json.dumps(sd["accepts"]),
                    "label_source": "lexicon-proxy" if proxy and set(sd["rules"]) & neutral_rules else "corpus",
                    "found": json.dumps({name: len(v) for name, v in found.items()}),
                    "rule": json.dumps(rule.model_dump(mode="json")) if rule else None,
                }
            )
    return out


def seeds_stage(specs: list[CapabilitySpec], s: S2lctConfig, seed: int) -> Stage:
    s = generation_view(s)

    def run(ctx: StageContext):
        proxy = bool(ctx.input("parse", "info").column("neutral_proxy")[0].as_py())
        rows = seed_rows(specs, ctx.input("parse", "search"), s, seed, proxy)
        if not rows:
            raise InputError("s2lct: no sentence of the corpus matches any capability's search rules")
        return {"data": pa.Table.from_pylist(rows)}

    return Stage("seeds", run, inputs=("parse",), config=[s, seed, list(specs)])


def expand_stage(s: S2lctConfig, seed: int) -> Stage:
    """Ray Data pass of expansion actors: parse each seed, Algorithm 1, fill, validate."""
    s = generation_view(s)

    def run(ctx: StageContext):
        from checkray.actors.s2lct.mask_filler import ExpansionActor

        seeds = ctx.input("seeds")
        reference = reference_index(ctx.input("grammar"), s.grammar_min_count)
        vocab: dict[str, list] = {}
        for row in ctx.input("grammar", "vocabulary").to_pylist():
            vocab.setdefault(row["tag"], []).append((row["word"], row["count"]))
        uni = ctx.input("grammar", "unigrams")
        bi = ctx.input("grammar", "bigrams")
        f = s.filler
        kwargs = dict(
            reference={k: [(list(r), n) for r, n in v] for k, v in reference.items()},
            vocabulary=vocab,
            unigrams=dict(zip(uni.column("word").to_pylist(), uni.column("count").to_pylist())),
            bigrams=list(zip(*(bi.column(c).to_pylist() for c in ("a", "b", "count")))),
            parser_pipeline=s.pipeline,
            parser=s.parser,
            backend=filler_backend(f),
            pipeline=f.pipeline,
            hf_model=f.hf_model,
            k=s.k,
            max_masks=s.max_masks,
            candidates=f.candidates,
            keep=f.keep,
            window=f.window,
            vector_weight=f.vector_weight,
            min_score=f.min_score,
            fillable=tuple(s.fillable_tags),
            seed=seed,
            keep_columns=("case_id",),
        )
        out = ray_map(seeds.select(["case_id", "text", "rule"]), ExpansionActor, kwargs, s, batch_size=16)
        return {"data": out}

    return Stage("expand", run, inputs=("seeds", "grammar"), config=[s, seed])


class S2lctJob(Job[S2lctConfig]):
    """parse -> grammar -> seeds -> expand; publishes the suite and the reference grammar.
    With models (given, or ``s2lct.models``) ``publish`` also runs the evaluation."""

    name, title, section = "s2lct", "checkray · S²LCT", S2lctConfig
    published = (SUITE_FILE, GRAMMAR_FILE)

    def check(self) -> None:
        s = self.conf
        self.capabilities = load_capabilities(s.capabilities or None)
        given = self.models
        self.models = select_models(given, s.models, s.only_models, what="s2lct.only_models")
        # The judge of the label-consistency stage may be any model of the registry.
        self.judges = select_models(given, s.models) if self.models else None
        self.label_notes = corpus_label_notes(self.cfg, s, self.capabilities, self.seed)
        for note in self.label_notes:
            console.print(f"[yellow]s2lct · warning · {note.message}[/yellow]", highlight=False, soft_wrap=True)
        preflight(s)

    def stages(self):
        s, seed = self.conf, self.seed
        yield parse_stage(self.cfg, s, self.capabilities, seed)
        yield grammar_stage(s)
        yield seeds_stage(self.capabilities, s, seed)
        yield expand_stage(s, seed)
        if self.models and s.consistency.enabled:
            yield consistency_stage(s, self.capabilities, self.judges, seed, self.cfg.section(CacheConfig))

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from checkray.jobs.s2lct.evaluate import evaluate_suite
        from checkray.jobs.s2lct.report import s2lct_sections

        s, run = self.conf, runner.run
        suite = suite_table(runner.output("seeds"), runner.output("expand"), filler_name(s.filler), self.seed)
        grammar = runner.output("grammar")
        run.write_table(SUITE_FILE, suite)
        run.write_table(GRAMMAR_FILE, grammar)
        evaluation = evaluate_suite(self.cfg, s, suite, self.models, run, self.seed) if self.models else None
        if evaluation is not None and "consistency" in runner.done:
            evaluation.consistency = runner.output("consistency")
            evaluation.consistency_summary = runner.output("consistency", "summary").to_pylist()
            evaluation.consistency_info = runner.output("consistency", "info").to_pylist()[0]
            run.write_table(CONSISTENCY_FILE, evaluation.consistency)
        return s2lct_sections(runner, suite, grammar, self.capabilities, s, evaluation, self.label_notes)


def corpus_label_notes(cfg: CheckrayConfig, s: S2lctConfig, specs: list[CapabilitySpec], seed: int) -> list[LabelNote]:
    """One note per capability whose rules need a label the searched corpus lacks; a
    one-line error when its labels share none with the rules' (a label map is missing)."""
    corpus = read_corpus(search_corpus_config(cfg, s, seed))
    labels = {v for v in corpus.column("label").to_pylist() if v is not None}
    if not labels:
        raise InputError(f"{cfg.corpus.path}: S2LCT needs a labeled corpus (the label column is empty)")
    return check_corpus_labels(specs, labels, s.neutral_label, s.neutral_proxy)


def run_s2lct(
    cfg: CheckrayConfig, out: str, specs: Sequence[ModelSpec] | None = None
) -> tuple[RunDir, list[ReportSection]]:
    """Run the job into ``out``; with model ``specs`` (or ``s2lct.models``) also the
    benchmark, Table 3, coverage and explanations. Returns the run dir and report sections."""
    result = run_job(S2lctJob(cfg, specs), out)
    return result.run, result.sections


def s2lct_command(
    corpus: Optional[str] = typer.Option(
        None, "--corpus", help="Labeled corpus (.parquet/.csv/.jsonl) or builtin:<name>."
    ),
    out: RunOut = None,
    models: Optional[str] = typer.Option(
        None, "--models", "-m", help="Model registry (zoo.yaml): benchmark the suite."
    ),
    config: ConfigFile = None,
    text_column: TextColumn = None,
    label_column: LabelColumn = None,
    labels: Labels = None,
    capabilities: Optional[list[str]] = typer.Option(None, "--capabilities", help="Capability spec files or folders."),
    sample: Optional[int] = typer.Option(None, "--sample", help="Search N corpus sentences drawn at random."),
    max_seeds: Optional[int] = typer.Option(None, "--max-seeds", help="Seeds per capability."),
    k: Optional[int] = typer.Option(None, "-k", help="Masked sentences per seed (Algorithm 1)."),
):
    """S²LCT: seeds found by capability rules, expanded where a reference grammar says sentences have more."""
    cfg = load_config(
        config,
        {
            **corpus_overrides(corpus, text_column, label_column, labels),
            "s2lct.models": models,
            "s2lct.capabilities": capabilities or None,
            "s2lct.search_sample": sample,
            "s2lct.max_seeds": max_seeds,
            "s2lct.k": k,
            "out": out,
        },
    )
    run = run_job(S2lctJob(cfg)).run
    typer.echo(f"wrote {run.uri}/{SUITE_FILE}, {GRAMMAR_FILE}, {REPORT_FILE}")
