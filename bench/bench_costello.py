"""COSTELLO throughput: triples scored per second, engine vs a plain loop; and the
embedding fan-out across models, in parallel vs one model after another.

1. Scoring (``costello_scoring``). Engine: the texts of all triples deduplicated, embedded
   once through ``checkray.actors.costello.embedders.embed_all`` (Ray Data, one actor), then L1/L2/
   cos distances and the four verdicts vectorised over every triple
   (``checkray.engine.costello.metrics``). Baseline: the shape of the authors' script, a Python
   loop that encodes each triple's three sentences with ``SentenceTransformer.encode``
   and compares their distances. Both embed with the same MiniLM (mean pooling); both pay
   their model load. Goal: engine >= 2x. The pure scoring part (distances + verdicts on
   ready embeddings) is also timed against a per-triple loop.
2. Fan-out (``costello_fanout``). ``embed_all`` with 3 models (MiniLM mean, MiniLM CLS,
   spaCy md vectors) in parallel (one actor per encoder, CPUs split: the two MiniLM
   poolings share one) vs ``parallel=False`` (one encoder after another). On 2 cores the
   gain can only come from overlapping model loads and Ray Data overheads with compute;
   goal: parallel >= 1.0x.
   Shared pass (``costello_shared_pass``): MiniLM mean and CLS through one ``embed_all``
   call (one actor, one forward pass, a two-mode ``Pooling``) vs one call per pooling
   (the two passes of before); same vectors; goal: >= 1.5x.

3. Whole-dictionary nearest neighbours (``costello_nn``): the job's block-wise kernel
   (``engine/costello/neighbours.py``: torch matrix products for L2/cos, numba for L1)
   vs scikit-learn's ``pairwise_distances`` in blocks of 1,024 rows (the code it replaced),
   on the MiniLM embeddings of ``--nn-words`` tokenizer entries, all three distances;
   same distances on both sides. Goal: >= 2x.
4. Repair curve (``--repair-curve RUN --model NAME``, not a speed test): the paper's repair
   loss on RUN's violated triples of NAME (distance/threshold of ``--verdict``), for each
   learning rate of ``--lrs`` from the original model, epoch by epoch: how many of the
   violated triples still violate (at the run's theta) and how many benign triples of a
   sample now do. It shows whether lr 1e-4 moves the model at all on this data.

Triples come from the bundled corpus through the job's own operators (``--source
engine``, default) or from a COSTELLO triple file (``--source PATH``, e.g. the authors'
contrast_triples_sst.json: {name: [[s, s+, s-], ...]}).

    .venv/bin/python bench/bench_costello.py [--n 600] [--quick] [--source PATH] [--nn-words N]
    .venv/bin/python bench/bench_costello.py --repair-curve RUN --model minilm_cls \
        [--lrs 1e-4,1e-3,1e-2] [--epochs 8] [--per-epoch 64] [--sample 200] [--verdict l2/mu-2sigma]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import base_parser, report, resolve_n, setup_env  # noqa: E402

THRESHOLD_NAMES = ("zero", "min", "mu-2sigma", "mu-sigma")
setup_env()
from checkray.engine.costello.distances import DISTANCES, distance  # noqa: E402
from checkray.engine.costello.metrics import violates  # noqa: E402


def load_triples(source: str, n: int) -> list[tuple[str, str, str]]:
    if source != "engine":
        data = json.loads(Path(source).read_text(encoding="utf-8"))
        triples = [tuple(t[:3]) for rows in data.values() for t in rows]
        rng = np.random.default_rng(0)
        return [triples[i] for i in rng.permutation(len(triples))[:n]]
    from checkray.engine.costello.triples import triple_table
    from checkray.engine.stages import RunDir, StageRunner
    from checkray.jobs.config import load_config
    from checkray.jobs.costello.job import mutate_stage, seeds_stage, triples_stage

    cfg = load_config(None, {"costello.seeds": max(50, n * 2)})
    cc = cfg.section("costello")
    with tempfile.TemporaryDirectory(prefix="crbench") as tmp:
        runner = StageRunner(RunDir(tmp), on_stage=lambda *_: None)
        runner.run_all([seeds_stage(cfg, cc, cfg.seed), mutate_stage(cc, cfg.seed), triples_stage(cc)])
        wide = triple_table(runner.output("triples"))
    rows = [r for r in wide.to_pylist() if r["seed_pair"] is None]
    return [(r["seed"], r["positive"], r["negative"]) for r in rows][:n]


def score_vectorised(S, P, N, theta):
    out = {}
    for m in DISTANCES:
        d_pos, d_neg = distance(S, P, m), distance(S, N, m)
        out[m] = {t: violates(d_pos, d_neg, theta[t]) for t in THRESHOLD_NAMES}
    return out


def score_loop(S, P, N, theta):
    out = {m: {t: [] for t in THRESHOLD_NAMES} for m in ("l1", "l2", "cos")}
    for s, p, q in zip(S, P, N):
        for m in ("l1", "l2", "cos"):
            if m == "l1":
                dp, dn = np.abs(s - p).sum(), np.abs(s - q).sum()
            elif m == "l2":
                dp, dn = np.linalg.norm(s - p), np.linalg.norm(s - q)
            else:
                dp = 1 - s @ p / (np.linalg.norm(s) * np.linalg.norm(p))
                dn = 1 - s @ q / (np.linalg.norm(s) * np.linalg.norm(q))
            for t in THRESHOLD_NAMES:
                out[m][t].append(dp - dn > theta[t])
    return out


def best_of(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_scoring(triples, spec) -> None:
    from checkray.actors.costello.embedders import embed_all
    from checkray.actors.costello.st_embedder import load_encoder

    theta = {"zero": 0.0, "min": 0.1, "mu-2sigma": 0.2, "mu-sigma": 0.3}
    n = len(triples)
    start = time.perf_counter()
    texts = list(dict.fromkeys(t for tr in triples for t in tr))
    vectors = embed_all(texts, [spec])[spec.name]
    index = {t: i for i, t in enumerate(texts)}
    S, P, N = (vectors[[index[tr[k]] for tr in triples]] for k in range(3))
    engine_verdicts = score_vectorised(S, P, N, theta)
    engine_seconds = time.perf_counter() - start
    engine_score = best_of(lambda: score_vectorised(S, P, N, theta))

    start = time.perf_counter()
    model = load_encoder(spec, device="cpu")
    base_vectors = [model.encode(list(tr), convert_to_numpy=True, show_progress_bar=False) for tr in triples]
    bS, bP, bN = (np.stack([v[k] for v in base_vectors]) for k in range(3))
    loop_verdicts = score_loop(bS, bP, bN, theta)
    base_seconds = time.perf_counter() - start
    loop_score = best_of(lambda: score_loop(bS, bP, bN, theta))

    agree = np.mean(
        [
            np.mean(np.asarray(loop_verdicts[m][t]) == engine_verdicts[m][t])
            for m in engine_verdicts
            for t in THRESHOLD_NAMES
        ]
    )
    ratio = base_seconds / engine_seconds
    report(
        "costello_scoring",
        [
            ("triples", f"{n} ({len(texts)} unique texts, {3 * n} in the loop)"),
            (
                "engine (embed_all + vectorised)",
                f"{n / engine_seconds:8.1f} triples/s ({engine_seconds:.1f}s incl. actor start + load)",
            ),
            (
                "baseline (encode per triple)",
                f"{n / base_seconds:8.1f} triples/s ({base_seconds:.1f}s incl. model load)",
            ),
            (
                "scoring only: vectorised",
                f"{n / max(engine_score, 1e-9):10.0f} triples/s ({engine_score * 1000:.2f} ms, 3 distances x 4 thresholds, best of 5)",
            ),
            (
                "scoring only: per-triple loop",
                f"{n / max(loop_score, 1e-9):10.0f} triples/s ({loop_score * 1000:.2f} ms; "
                f"{loop_score / max(engine_score, 1e-9):.0f}x slower)",
            ),
            ("verdict agreement", f"{agree:.4f} (same model; batch padding moves embeddings by float noise)"),
        ],
        ratio,
        ">= 2x",
        ratio >= 2.0,
        extra={"n": n},
    )


def _time_both(texts, specs, engine, baseline) -> tuple[tuple[float, float], bool]:
    """Seconds of two ways to embed ``texts`` with ``specs`` (Ray Data warmed first; both
    pay their model loads) and whether they gave the same vectors."""
    from checkray.actors.costello.embedders import embed_all

    embed_all(texts[:8], specs[:1])
    seconds, vectors = [], []
    for run in (engine, baseline):
        start = time.perf_counter()
        vectors.append(run())
        seconds.append(time.perf_counter() - start)
    same = all(np.allclose(vectors[0][s.name], vectors[1][s.name], atol=1e-4) for s in specs)
    return (seconds[0], seconds[1]), same


def bench_fanout(texts, specs) -> None:
    from checkray.actors.costello.embedders import embed_all

    (par_seconds, seq_seconds), same = _time_both(
        texts, specs, lambda: embed_all(texts, specs, parallel=True), lambda: embed_all(texts, specs, parallel=False)
    )
    ratio = seq_seconds / par_seconds
    report(
        "costello_fanout",
        [
            ("texts x models", f"{len(texts)} x {len(specs)} ({', '.join(s.name for s in specs)})"),
            ("parallel (transformer encoders side by side, then spaCy)", f"{par_seconds:.1f}s"),
            ("sequential (one encoder after another)", f"{seq_seconds:.1f}s"),
            ("same embeddings", str(same)),
        ],
        ratio,
        ">= 1.0x",
        ratio >= 1.0,
        extra={"n": len(texts)},
    )


def bench_shared_pass(texts, specs) -> None:
    from checkray.actors.costello.embedders import embed_all

    (shared_seconds, apart_seconds), same = _time_both(
        texts, specs, lambda: embed_all(texts, specs), lambda: {s.name: embed_all(texts, [s])[s.name] for s in specs}
    )
    ratio = apart_seconds / shared_seconds
    report(
        "costello_shared_pass",
        [
            ("texts x poolings", f"{len(texts)} x {len(specs)} ({', '.join(s.name for s in specs)})"),
            ("one pass, poolings side by side", f"{shared_seconds:.1f}s"),
            ("one pass per pooling", f"{apart_seconds:.1f}s"),
            ("same embeddings", str(same)),
        ],
        ratio,
        ">= 1.5x",
        ratio >= 1.5 and same,
        extra={"n": len(texts)},
    )


def bench_nn(spec, n_words: int) -> None:
    """Block-wise whole-dictionary nearest neighbours vs sklearn's pairwise_distances."""
    from sklearn.metrics import pairwise_distances

    from checkray.actors.costello.embedders import embed_all
    from checkray.actors.costello.st_embedder import tokenizer_vocabulary
    from checkray.engine.costello.neighbours import nearest_neighbour_distances, usable_rows

    words = tokenizer_vocabulary(spec, "all")[:n_words]
    X = usable_rows(embed_all(words, [spec])[spec.name])
    names = {"l1": "manhattan", "l2": "euclidean", "cos": "cosine"}

    def sklearn_nn(metric):
        out = np.empty(len(X))
        Y = X.astype(np.float64)
        for a in range(0, len(Y), 1024):
            block = pairwise_distances(Y[a : a + 1024], Y, metric=names[metric])
            block[np.arange(len(block)), np.arange(a, a + len(block))] = np.inf
            out[a : a + len(block)] = block.min(axis=1)
        return out

    nearest_neighbour_distances(X[:64], "l1")  # numba compile outside the timing
    start = time.perf_counter()
    ours = {m: nearest_neighbour_distances(X, m, threads=2) for m in DISTANCES}
    engine_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = {m: sklearn_nn(m) for m in DISTANCES}
    base_s = time.perf_counter() - start
    same = all(np.allclose(ours[m], theirs[m], rtol=1e-4, atol=1e-5) for m in DISTANCES)
    ratio = base_s / engine_s
    report(
        "costello_nn",
        [
            ("dictionary", f"{len(X)} tokenizer entries of {spec.name}, L1 + L2 + cos"),
            ("engine (torch blocks + numba L1)", f"{engine_s:.1f}s"),
            ("sklearn pairwise_distances, 1,024-row blocks", f"{base_s:.1f}s"),
            ("same distances", str(same)),
        ],
        ratio,
        ">= 2x",
        ratio >= 2.0 and same,
        extra={"n": len(X)},
    )


def repair_curve(run_dir: str, model: str, lrs, epochs: int, per_epoch: int, verdict: str, sample: int = 200) -> None:
    """Remaining violations epoch by epoch for each learning rate (printed table)."""
    import pyarrow.compute as pc

    from checkray.actors.costello.repair import train_repair
    from checkray.actors.costello.st_embedder import load_encoder
    from checkray.engine.costello.config import EmbedderSpec, RepairConfig, RepairSettings
    from checkray.engine.costello.repair import split_triples
    from checkray.engine.stages import RunDir
    from checkray.jobs.costello.repair import read_published, source_config

    metric, threshold = verdict.split("/")
    src = RunDir(run_dir)
    meta, cc = source_config(src, RepairConfig(distance=metric, threshold=threshold))
    spec = next(e for e in meta["embedders"] if e["name"] == model)
    from checkray.engine.costello.triples import triple_table

    wide = triple_table(read_published(src, "triples.parquet"))
    wide = wide.filter(pc.equal(wide["suite"], cc.suite))
    v = read_published(src, "violations.parquet")
    v = v.filter(pc.and_(pc.equal(v["model"], model), pc.equal(v["suite"], cc.suite)))
    violated, benign = split_triples(wide, v, metric, threshold)
    thr = read_published(src, "thresholds.parquet").to_pandas()
    theta = float(thr[(thr.model == model) & (thr.distance == metric) & (thr.threshold == threshold)].theta.iloc[0])
    rng = np.random.default_rng(0)
    print(f"{model}: {len(violated)} violated / {len(benign)} benign triples at {verdict} (theta {theta:.4f})")
    # Seeded samples keep the curve affordable: `sample` violated triples trained on and
    # re-checked, 2x as many benign ones as anchors, and another `sample` benign ones probed.
    order = rng.permutation(len(benign))
    violated = [violated[i] for i in rng.permutation(len(violated))[:sample]]
    anchors = [benign[i] for i in order[: 2 * sample]]
    probe_benign = [benign[i] for i in order[2 * sample : 3 * sample]]
    benign = anchors
    print(f"  curve on {len(violated)} violated, {len(benign)} benign anchors, {len(probe_benign)} benign probes")

    def count(m, triples):
        if not triples:
            return 0
        texts = list(dict.fromkeys(t for tr in triples for t in tr))
        emb = dict(zip(texts, m.encode(texts, batch_size=64, convert_to_numpy=True, show_progress_bar=False)))
        S, P, N = (np.stack([emb[t[i]] for t in triples]) for i in range(3))
        return int(violates(distance(S, P, metric), distance(S, N, metric), theta).sum())

    rows = []
    for lr in lrs:
        m = load_encoder(EmbedderSpec.model_validate(spec), backend="torch")  # trained below
        used = list(dict.fromkeys(t for tr in benign for t in tr))
        old = dict(zip(used, m.encode(used, batch_size=64, convert_to_numpy=True, show_progress_bar=False)))
        rows.append((lr, 0, count(m, violated), count(m, probe_benign), 0.0))
        print(f"  lr {lr:g} epoch 0: {rows[-1][2]} of {len(violated)} still violate, {rows[-1][3]} benign now violate")
        for epoch in range(1, epochs + 1):
            settings = RepairSettings(learning_rate=lr, epochs=1, max_triples=per_epoch, seed=epoch)
            res = train_repair(m, violated, benign, settings, old_embeddings=old)
            rows.append((lr, epoch, count(m, violated), count(m, probe_benign), res.history[0]["loss"]))
            print(
                f"  lr {lr:g} epoch {epoch}: {rows[-1][2]} of {len(violated)} still violate, "
                f"{rows[-1][3]} of {len(probe_benign)} benign now violate, loss {rows[-1][4]:.4f}"
            )
    print("\n| lr | epoch | violated triples still violating | benign sample now violating | mean loss |")
    print("| --- | --- | --- | --- | --- |")
    for lr, epoch, still, broken, loss in rows:
        print(f"| {lr:g} | {epoch} | {still} / {len(violated)} | {broken} / {len(probe_benign)} | {loss:.4f} |")


def main() -> None:
    setup_env()
    parser = base_parser(__doc__.splitlines()[0], default_n=600, quick_n=60)
    parser.add_argument("--source", default="engine", help="'engine' or a COSTELLO triple JSON file")
    parser.add_argument("--nn-words", type=int, default=8000, help="dictionary size of the nearest-neighbour bench")
    parser.add_argument("--repair-curve", default=None, help="a costello run directory: print the repair curve")
    parser.add_argument("--model", default=None, help="embedder of the repair curve")
    parser.add_argument("--lrs", default="1e-4,1e-3,1e-2")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--per-epoch", type=int, default=64, help="violated + benign triples per epoch (each)")
    parser.add_argument("--verdict", default="l2/mu-2sigma", help="distance/threshold whose violations are repaired")
    parser.add_argument("--sample", type=int, default=200, help="violated triples of the repair curve (seeded sample)")
    args = parser.parse_args()
    n = resolve_n(args)
    from checkray.engine.config import RuntimeConfig
    from checkray.engine.costello.config import EmbedderSpec
    from checkray.engine.runtime import init_ray

    if args.repair_curve:
        lrs = [float(x) for x in args.lrs.split(",")]
        repair_curve(args.repair_curve, args.model, lrs, args.epochs, args.per_epoch, args.verdict, args.sample)
        return
    init_ray(RuntimeConfig())
    triples = load_triples(args.source, n)
    minilm = EmbedderSpec(name="minilm_mean", model="builtin:minilm", pooling="mean", max_length=128)
    bench_scoring(triples, minilm)
    texts = list(dict.fromkeys(t for tr in triples for t in tr))
    specs = [
        minilm,
        EmbedderSpec(name="minilm_cls", model="builtin:minilm", pooling="cls", max_length=128),
        EmbedderSpec(name="spacy_md", kind="spacy", model="builtin:md"),
    ]
    bench_fanout(texts, specs)
    bench_shared_pass(texts, specs[:2])
    bench_nn(minilm, 600 if args.quick else args.nn_words)


if __name__ == "__main__":
    main()
