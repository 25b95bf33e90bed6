"""Encoder throughput on CPU: PyTorch ``encode`` vs ONNX Runtime fp32 and int8.

Each arm encodes the same sentences with the same batching (longest first, 64 per batch,
normalised), every core, the model already loaded (its load is timed and printed apart):

* ``torch``: ``SentenceTransformer.encode``, the plain PyTorch path (the baseline);
* ``onnx``: ``checkray.actors.onnx_models.OnnxSentenceEncoder``, fp32 (what ``runtime.encoder:
  auto`` runs on CPU);
* ``onnx-int8``: the same graph with dynamically quantised int8 weights;
* ``torch-bf16``: ``encode`` under CPU bf16 autocast (what ``auto`` runs on a CPU with a
  native bf16 matrix unit, Intel AMX); run only on such a CPU (elsewhere it is emulated).

Arms run alternately ``--repeat`` times, best kept. Printed per arm: sentences/s, the
ratio to PyTorch, the cosine of its vectors to PyTorch's (min and mean), and the physical
reference: the multiply-adds the encoder must do on the padded token batches divided by
this machine's measured float32 matrix-multiply rate (NumPy's BLAS, every core), i.e.
the time a perfect fp32 kernel would take on the sentences' own tokens (no pads). int8
can pass it: its multiply-adds are cheaper than float32 ones. The export cache is a folder of its own (cold for
the first load, so the export is timed and printed; every later load is warm).

    .venv/bin/python bench/bench_encoders.py [--n 8530] [--repeat 2] [--model builtin:minilm] [--quick]

``--n`` above 8,530 repeats the bundled sentences with a suffix (" (copy c)"), as
``bench_embedding.py`` does.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RT_SIZE, add_repeat, base_parser, report, resolve_n, rt_table, setup_env  # noqa: E402

ARMS = ("torch", "onnx", "onnx-int8", "torch-bf16")
BATCH = 64


def arms() -> tuple[str, ...]:
    from checkray.engine.inference import cpu_native_bf16

    return ARMS if cpu_native_bf16() else tuple(a for a in ARMS if a != "torch-bf16")


def sentences(n: int) -> list[str]:
    base = rt_table(min(n, RT_SIZE)).column("text").to_pylist()
    out, c = list(base), 1
    while len(out) < n:
        out.extend(f"{t} (copy {c})" for t in base)
        c += 1
    return out[:n]


def matmul_gflops(seconds: float = 3.0) -> float:
    """This machine's float32 matrix-multiply rate (NumPy's BLAS, every core), best of runs."""
    import numpy as np

    a, b = np.random.rand(1024, 1024).astype(np.float32), np.random.rand(1024, 1024).astype(np.float32)
    a @ b
    best, end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * 1024**3 / (time.perf_counter() - start) / 1e9)
    return best


def multiply_adds(model, texts: list[str]) -> dict[str, tuple[float, int]]:
    """(multiply-adds, tokens) of one pass over ``texts``: ``real`` counts every sentence's
    own tokens only (what any runtime must do, the floor's work); ``chars`` and ``tokens``
    the padded batches of 64 formed longest first by characters (sentence-transformers'
    ``encode``) and by tokens (the ONNX path)."""
    config = model[0].auto_model.config
    d, ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    lengths = [
        len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
    ]

    def cost(rows: int, width: int) -> float:
        # per token and layer: Q, K, V, output projections (4 d^2), the feed-forward
        # (2 d ff), attention scores and the weighted sum (2 width d)
        return rows * width * layers * (4 * d * d + 2 * d * ff + 2 * width * d)

    out = {"real": (sum(cost(1, n) for n in lengths), sum(lengths))}
    for name, key in (("chars", lambda i: -len(texts[i])), ("tokens", lambda i: -lengths[i])):
        order = sorted(range(len(texts)), key=key)
        macs, tokens = 0.0, 0
        for start in range(0, len(order), BATCH):
            batch = [lengths[i] for i in order[start : start + BATCH]]
            macs, tokens = macs + cost(len(batch), max(batch)), tokens + len(batch) * max(batch)
        out[name] = (macs, tokens)
    return out


def load(arm: str, model: str):
    from checkray.actors.embedder import load_sentence_transformer

    start = time.perf_counter()
    encoder = load_sentence_transformer(model, device="cpu", threads=os.cpu_count(), backend=arm)
    return encoder, time.perf_counter() - start


def encode(encoder, texts: list[str]):
    start = time.perf_counter()
    vectors = encoder.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)
    return time.perf_counter() - start, vectors


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], RT_SIZE, 1000)
    add_repeat(parser)
    parser.add_argument("--model", default="builtin:minilm")
    args = parser.parse_args()
    setup_env()
    cold = tempfile.mkdtemp(prefix="bench-encoders-")  # a cold export cache, removed at the end
    os.environ["CHECKRAY_ONNX_CACHE"] = cold
    try:
        measure(args)
    finally:
        shutil.rmtree(cold, ignore_errors=True)


def measure(args) -> None:
    n, repeat = resolve_n(args), args.repeat or (1 if args.quick else 2)
    texts = sentences(n)
    run = arms()
    loaded = {arm: load(arm, args.model) for arm in run}  # first ONNX load exports (timed)
    warm_load = {arm: load(arm, args.model)[1] for arm in run}
    best = {arm: float("inf") for arm in run}
    vectors = {}
    for _ in range(repeat):
        for arm in run:
            seconds, vectors[arm] = encode(loaded[arm][0], texts)
            best[arm] = min(best[arm], seconds)
    work = multiply_adds(loaded["torch"][0], texts)
    macs, tokens = work["real"]
    gflops = matmul_gflops()
    floor = 2 * macs / (gflops * 1e9)
    padded = ", ".join(f"{work[k][1]:,} padded by {k}" for k in ("chars", "tokens"))
    lines = [
        ("sentences", f"{n:,} ({tokens:,} tokens, {padded}; {macs / 1e9:,.1f} G multiply-adds unpadded)"),
        (
            "machine",
            f"{os.cpu_count()} cores, float32 matmul {gflops:,.1f} GFLOP/s (NumPy BLAS), load {os.getloadavg()[0]:.2f}",
        ),
        ("physical floor", f"{floor:.1f} s = unpadded multiply-adds x 2 / matmul rate ({n / floor:,.0f} sentences/s)"),
    ]
    result = {"n": n, "tokens": tokens, "gflops": gflops, "floor_s": floor}
    if "torch-bf16" not in run:
        lines.append(("torch-bf16", "not run: this CPU has no native bf16 (engine/inference.py)"))
    for arm in run:
        cos = (vectors[arm] * vectors["torch"]).sum(1)
        ratio = best["torch"] / best[arm]
        lines.append(
            (
                arm,
                f"{best[arm]:.1f} s, {n / best[arm]:,.0f} sentences/s, {ratio:.2f}x torch, "
                f"{floor / best[arm]:.0%} of the floor; cosine to torch min {cos.min():.4f} mean {cos.mean():.4f}; "
                f"load {loaded[arm][1]:.1f} s first, {warm_load[arm]:.1f} s cached",
            )
        )
        result[arm] = {"seconds": best[arm], "ratio": ratio, "cos_min": float(cos.min()), "cos_mean": float(cos.mean())}
    fp32, int8 = result["onnx"]["ratio"], result["onnx-int8"]["ratio"]
    ok = fp32 >= 2.0 and int8 >= 3.0 and result["onnx"]["cos_min"] > 0.9999
    report("encoders", lines, fp32, "onnx fp32 >= 2x torch, int8 >= 3x; fp32 cosine > 0.9999", ok, result)


if __name__ == "__main__":
    main()
