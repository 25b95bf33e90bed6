"""The ``costello`` job: contrastive testing of embedding models (Jiang et al., FSE 2024).

    corpus -> seeds (+ classifier training sentences, + dictionary words)
           -> mutate   (Ray Data actor pool: spaCy POS + WordNet + lexicons)
           -> triples  (CR1-CR4, common test-case schema)
           -> embed    (one Ray actor per embedding model, all in parallel)
           -> validate (distances, adaptive thresholds, downstream-MLP Wilcoxon ground truth)

``checkray costello --corpus PATH --embedders FILE --out DIR`` publishes (``DIR/manifest.json``)
``triples.parquet`` (3 rows per triple), ``violations.parquet`` (model, triple, capability,
distance, threshold, theta, d_pos, d_neg, verdict, gt_a, gt_b, p-values),
``thresholds.parquet``, ``costello.json`` (config and resolved embedders) and
``report.html``; and, for the re-test of ``checkray repair``, which reads only published
files: ``train.parquet`` (the classifiers' training sentences), ``dictionaries.parquet``
(each model's threshold dictionary) and ``classifiers.parquet`` (their accuracies).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import typer

from actors.costello.embedders import EmbedderSpec
from engine.benchmark.registry import ModelSpec
from engine.config import read_yaml
from engine.corpus import corpus_fingerprint, read_corpus
from engine.costello.mutations import Variant, normalize, read_inversions
from engine.costello.triples import Seed, assemble, counts_per_cr, triple_table, triples_to_cases
from engine.errors import ConfigError, InputError
from engine.report import Section as ReportSection
from engine.stages import RunDir, Stage, StageContext, StageRunner
from jobs.base import Job, run_job
from jobs.config import CheckrayConfig, load_config
from jobs.costello.config import CostelloConfig, RepairConfig
from jobs.costello.repair import most_violated, run_repair
from jobs.costello.validate import texts_to_embed
from jobs.options import ConfigFile, LabelColumn, Labels, RunOut, TextColumn, corpus_overrides
from jobs.zoo.resolve import select_models

ROOT = Path(__file__).resolve().parents[2]
VERSION = "1"


def repo_path(path: str) -> str:
    """Relative config paths resolve against the working directory, then the repo."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists() or not (ROOT / p).exists():
        return str(p)
    return str(ROOT / p)


def read_embedders(path: str, zoo: Sequence[ModelSpec] = ()) -> list[EmbedderSpec]:
    """The embedder list (``{embedders: [...]}``); ``zoo:<name>`` models resolve to the
    zoo registry's model directory."""
    p = Path(repo_path(path))
    if not p.is_file():
        raise InputError(f"{path}: embedders file not found")
    data = read_yaml(p)
    items = data.get("embedders") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(f"{p}: expected a non-empty 'embedders' list")
    by_name = {s.name: s for s in zoo}
    specs = []
    for i, item in enumerate(items):
        try:
            spec = EmbedderSpec.model_validate(item)
        except Exception as exc:  # pydantic ValidationError: one line naming the entry
            raise ConfigError(f"{p}: embedders[{i}]: {str(exc).splitlines()[-1].strip()}") from None
        if spec.model.startswith("zoo:"):
            ref = spec.model.split(":", 1)[1]
            if ref not in by_name or not by_name[ref].path:
                raise InputError(f"{p}: embedder '{spec.name}' names {spec.model} but no such zoo model was given")
            spec = spec.model_copy(update={"model": by_name[ref].path})
        specs.append(spec)
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigError(f"{p}: embedder names must be unique ({', '.join(names)})")
    return specs


def pick_seeds(corpus: pa.Table, n: int, inversions: dict[str, str] | None, seed: int) -> np.ndarray:
    """Row indices: sentences of the inversion table found in the corpus first (CR3 needs
    them), then a seeded random sample."""
    texts = corpus.column("text").to_pylist()
    hits = [i for i, t in enumerate(texts) if inversions and normalize(t) in inversions][:n]
    rest = np.setdiff1d(np.arange(len(texts)), hits)
    rng = np.random.default_rng(seed)
    extra = rng.choice(rest, size=min(len(rest), n - len(hits)), replace=False) if n > len(hits) else []
    return np.sort(np.concatenate([np.asarray(hits, dtype=np.int64), np.asarray(extra, dtype=np.int64)]))


def dictionary_words(texts: Sequence[str], size: int, seed: int) -> list[str]:
    """A user dictionary from the corpus (the paper's 'SST dictionary'): alphabetic words
    seen at least twice, a seeded sample of ``size``."""
    counts = Counter(w for t in texts for w in re.findall(r"[a-z]+", t.lower()) if len(w) > 1)
    words = sorted(w for w, c in counts.items() if c >= 2)
    if len(words) > size:
        rng = np.random.default_rng(seed)
        words = sorted(rng.choice(words, size=size, replace=False).tolist())
    return words


def tokenizer_words(spec: EmbedderSpec, size: int, seed: int) -> list[str] | None:
    """A seeded sample of the whole-word, alphabetic entries of a model's tokenizer
    vocabulary (no word pieces, no special tokens); None for spaCy vectors."""
    if spec.kind != "sentence-transformers":
        return None
    from transformers import AutoTokenizer

    from actors.embedder import resolve_model

    try:
        vocab = AutoTokenizer.from_pretrained(resolve_model(spec.model)).get_vocab()
    except (OSError, ValueError) as exc:
        raise InputError(f"embedder '{spec.name}': cannot read its tokenizer: {str(exc).splitlines()[0]}") from None
    # BPE/SentencePiece vocabularies mark a word start with a prefix (GPT-2's "\u0120",
    # SentencePiece's "\u2581"); WordPiece marks continuations with "##".
    stripped = (w.lstrip("\u0120\u2581") for w in vocab if not w.startswith("##"))
    words = sorted({w.lower() for w in stripped if len(w) > 1 and w.isascii() and w.isalpha()})
    if len(words) > size:
        words = sorted(np.random.default_rng(seed).choice(words, size=size, replace=False).tolist())
    return words


def model_dictionaries(
    specs: Sequence[EmbedderSpec], corpus_words: pa.Table, cc: CostelloConfig, seed: int
) -> dict[str, pa.Table]:
    out = {}
    for spec in specs:
        words = tokenizer_words(spec, cc.dictionary_size, seed) if cc.dictionary == "tokenizer" else None
        out[spec.name] = corpus_words if words is None else pa.table({"word": pa.array(words, pa.string())})
    return out


def seeds_stage(cfg: CheckrayConfig, cc: CostelloConfig, seed: int) -> Stage:
    # Each stage sees only the fields it reads (Section.view): changing the verdict,
    # the classifiers or the report reruns validation, not mutation or embedding.
    cc = cc.view("seeds", "inversions", "pairs", "classifier_train", "dictionary_size")

    def run(ctx: StageContext):
        corpus = read_corpus(cfg.corpus)
        inv = read_inversions(repo_path(cc.inversions)) if cc.inversions else None
        idx = pick_seeds(corpus, cc.seeds, inv, seed)
        seeds = corpus.take(pa.array(idx)).select(["id", "text", "label"])
        seeds = seeds.append_column("text_pair", pa.nulls(seeds.num_rows, pa.string()))
        if cc.pairs:
            pairs = read_corpus(
                cfg.corpus.model_copy(
                    update=dict(
                        path=cc.pairs.path,
                        text_column=cc.pairs.text_column,
                        label_column=None,
                        limit=cc.pairs.limit,
                        sample=None,
                    )
                )
            )
            pair_text = [json.loads(m or "{}").get(cc.pairs.pair_column) for m in pairs.column("meta").to_pylist()]
            if all(p is None for p in pair_text):
                raise InputError(f"{cc.pairs.path}: missing pair column '{cc.pairs.pair_column}'")
            seeds = pa.concat_tables(
                [
                    seeds,
                    pa.table(
                        {
                            "id": pa.array([f"pair-{i}" for i in pairs.column("id").to_pylist()]),
                            "text": pairs.column("text"),
                            "label": pa.nulls(pairs.num_rows, pa.string()),
                            "text_pair": pa.array(pair_text, pa.string()),
                        }
                    ),
                ]
            )
        rest = np.setdiff1d(np.arange(corpus.num_rows), idx)
        train = np.array([], dtype=np.int64)
        if corpus.column("label").null_count < corpus.num_rows:
            rng = np.random.default_rng(seed + 1)
            train = np.sort(rng.choice(rest, size=min(len(rest), cc.classifier_train), replace=False))
        words = dictionary_words(corpus.column("text").to_pylist(), cc.dictionary_size, seed)
        return {
            "seeds": seeds,
            "train": corpus.take(pa.array(train, pa.int64())).select(["id", "text", "label"]),
            "dictionary": pa.table({"word": pa.array(words, pa.string())}),
        }

    return Stage(
        "seeds", run, config=[cc, cfg.corpus, seed], external=(corpus_fingerprint(cfg.corpus),), version=VERSION
    )


def mutate_stage(cc: CostelloConfig) -> Stage:
    cc = cc.view("pipeline", "inversions", "polarity_guard")

    def run(ctx: StageContext):
        from actors.costello.mutators import mutate_corpus

        seeds = ctx.input("seeds", "seeds")
        inv = repo_path(cc.inversions) if cc.inversions else None
        return {"data": mutate_corpus(seeds, cc.pipeline, inv, cc.polarity_guard, 1, batch_size=64)}

    return Stage("mutate", run, inputs=("seeds",), config=[cc], version=VERSION)


def triples_stage(cc: CostelloConfig) -> Stage:
    cc = cc.view("suite", "per_seed")

    def run(ctx: StageContext):
        seeds = [Seed(r["id"], r["text"], r["label"], r["text_pair"]) for r in ctx.input("seeds", "seeds").to_pylist()]
        variants: dict[str, list[Variant]] = {}
        for r in ctx.input("mutate").to_pylist():
            variants.setdefault(r.pop("seed_id"), []).append(Variant(**r))
        triples = assemble(seeds, variants, cc.suite, cc.per_seed)
        if not triples:
            raise InputError(
                "costello: no contrast triple could be built from the seeds (no adjective/verb "
                "with a polarity-guarded synonym and antonym, no gendered word, no inversion hit)"
            )
        return {"data": triples_to_cases(triples, cc.suite)}

    return Stage("triples", run, inputs=("seeds", "mutate"), config=[cc], version=VERSION)


def embed_stage(cc: CostelloConfig, specs: Sequence[EmbedderSpec], seed: int) -> Stage:
    cc = cc.view("dictionary", "dictionary_size", "backend", "batch_size")

    def run(ctx: StageContext):
        from actors.costello.embedders import embed_all
        from engine.arrays import embeddings_column

        dicts = model_dictionaries(specs, ctx.input("seeds", "dictionary"), cc, seed)
        texts = texts_to_embed(triple_table(ctx.input("triples")), ctx.input("seeds", "train"), *dicts.values())
        vectors = embed_all(texts, specs, cc.backend, cc.batch_size)
        out = {"texts": pa.table({"text": pa.array(texts, pa.string())})}
        out.update({f"dict-{name}": table for name, table in dicts.items()})
        for name, matrix in vectors.items():
            out[f"emb-{name}"] = pa.table({"embedding": embeddings_column(matrix)})
        return out

    return Stage("embed", run, inputs=("triples", "seeds"), config=[cc, list(specs), seed], version=VERSION)


def validate_stage(cc: CostelloConfig, specs: Sequence[EmbedderSpec], seed: int) -> Stage:
    def run(ctx: StageContext):
        from engine.arrays import column_to_numpy
        from jobs.costello.validate import score_model

        wide = triple_table(ctx.input("triples"))
        texts = ctx.input("embed", "texts").column("text").to_pylist()
        train = ctx.input("seeds", "train")
        parts, thr_rows, acc_rows = [], [], []
        for spec in specs:
            matrix = column_to_numpy(ctx.input("embed", f"emb-{spec.name}").column("embedding"))
            lookup = dict(zip(texts, matrix))
            dictionary = ctx.input("embed", f"dict-{spec.name}")
            viol, thr, accs = score_model(spec.name, lookup, wide, train, dictionary, cc, seed)
            parts.append(viol)
            thr_rows += thr
            acc_rows += [{"model": spec.name, "classifier": i, "accuracy": a} for i, a in enumerate(accs)]
        return {
            "violations": pa.concat_tables(parts),
            "thresholds": pa.Table.from_pylist(thr_rows),
            "classifiers": pa.Table.from_pylist(
                acc_rows,
                schema=pa.schema([("model", pa.string()), ("classifier", pa.int64()), ("accuracy", pa.float64())]),
            ),
        }

    return Stage("validate", run, inputs=("triples", "seeds", "embed"), config=[cc, seed], version=VERSION)


class CostelloJob(Job[CostelloConfig]):
    """seeds -> mutate -> triples -> embed -> validate. ``models``: a zoo registry's specs
    (or ``zoo``, its file) for ``zoo:<name>`` embedders."""

    name, title, section = "costello", "checkray · costello", CostelloConfig
    published = (
        "triples.parquet",
        "violations.parquet",
        "thresholds.parquet",
        "costello.json",
        "train.parquet",
        "dictionaries.parquet",
        "classifiers.parquet",
    )

    def __init__(self, cfg: CheckrayConfig, models: Sequence[ModelSpec] | None = None, zoo: str | None = None):
        super().__init__(cfg, models)
        self.zoo = zoo

    def check(self) -> None:
        from actors.costello.embedders import check_spec

        self.models = select_models(self.models, self.zoo)
        self.embedders = read_embedders(self.conf.embedders, self.models or ())
        for spec in self.embedders:
            check_spec(spec)

    def stages(self):
        cc, seed = self.conf, self.seed
        yield seeds_stage(self.cfg, cc, seed)
        yield mutate_stage(cc)
        yield triples_stage(cc)
        yield embed_stage(cc, self.embedders, seed)
        yield validate_stage(cc, self.embedders, seed)

    def publish(self, runner: StageRunner) -> list[ReportSection]:
        from jobs.costello.report import costello_sections

        run, cc = runner.run, self.conf
        cases = runner.output("triples")
        violations = runner.output("validate", "violations")
        thresholds = runner.output("validate", "thresholds")
        classifiers = runner.output("validate", "classifiers")
        run.write_table("triples.parquet", cases)
        run.write_table("violations.parquet", violations)
        run.write_table("thresholds.parquet", thresholds)
        run.write_text(
            "costello.json",
            json.dumps(
                {"config": self.cfg.model_dump(mode="json"), "embedders": [s.model_dump() for s in self.embedders]},
                indent=1,
            ),
        )
        run.write_table("train.parquet", runner.output("seeds", "train"))
        dicts = {s.name: runner.output("embed", f"dict-{s.name}").column("word") for s in self.embedders}
        run.write_table(
            "dictionaries.parquet",
            pa.concat_tables(
                [
                    pa.table({"model": pa.array([name] * len(words), pa.string()), "word": words})
                    for name, words in dicts.items()
                ]
            ),
        )
        run.write_table("classifiers.parquet", classifiers)
        return costello_sections(triple_table(cases), violations, thresholds, classifiers, cc)


def run_costello(
    cfg: CheckrayConfig, out: str, specs: Sequence[ModelSpec] = (), repair: bool = True
) -> tuple[RunDir, list[ReportSection]]:
    """The whole job into ``out``; ``specs`` (a zoo registry) resolves ``zoo:<name>``
    embedders. With ``repair`` and ``repair.model`` set (the demo), a short repair of that
    model ("most-violated": the worst one) follows in ``out/repair`` and its sections are
    appended; a repair that cannot run (nothing violated ...) becomes a report line."""
    result = run_job(CostelloJob(cfg, list(specs)), out)
    run, sections = result.run, list(result.sections)
    rc = cfg.section(RepairConfig)
    if repair and rc.model:
        model = rc.model if rc.model != "most-violated" else most_violated(run, rc)
        try:
            _, repair_sections = run_repair(cfg, run.uri, model, run.path("repair"))
        except InputError as exc:  # e.g. nothing violated: the demo reports it and goes on
            repair_sections = [ReportSection("COSTELLO repair", [], f"repair skipped: {exc}")]
        sections += repair_sections
    return run, sections


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
            "out": out,
        },
    )
    run = run_job(CostelloJob(cfg, zoo=zoo)).run
    counts = counts_per_cr(triple_table(run.read_table("triples.parquet")))
    typer.echo(
        "costello: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f" triples -> {run.path('triples.parquet')}, violations.parquet, report.html"
    )
