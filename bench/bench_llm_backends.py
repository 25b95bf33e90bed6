"""CPU generation engines on the packaged Qwen2.5-Coder-0.5B-Instruct: llama.cpp vs transformers.

Engines: ``llamacpp`` (llama.cpp through the prebuilt xllamacpp wheel, the default),
``llama-cpp-python`` (the opt-in source build; skipped when not installed) and
``transformers``.

Each engine runs in its own fresh interpreter (so load times include imports, as a new
actor pays them) on the same chat prompts, greedy, same ``max_tokens``, same threads:
- load: llama.cpp maps the GGUF; transformers loads the safetensors copy made from the
  GGUF (the one-time dequantize-and-save step is timed separately when it has to run);
- decode tokens/s: completion tokens / generation wall time, over all prompts.
The engines run alternately ``--rounds`` times (llama.cpp, transformers, llama.cpp, ...)
and each keeps its best round, so a burst of load from other processes on a shared
machine does not decide the comparison. The ratio printed is llama.cpp (xllamacpp) tokens/s
over the ``--baseline`` engine's (default transformers) measured in this run; with
llama-cpp-python installed, its tokens/s over xllamacpp's is printed too (what the
prebuilt wheel, built without AVX-512, costs against a build with AVX2/FMA flags).
``--engines`` picks a subset (transformers first converts the GGUF once, minutes under load).

    .venv/bin/python bench/bench_llm_backends.py [--n 8] [--max-tokens 48] [--quick]
        [--engines llamacpp,llama-cpp-python] [--baseline llama-cpp-python]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit_child_result, report, run_child, setup_env  # noqa: E402

PROMPTS = [
    "Write one short sentence praising a restaurant.",
    "Write one short sentence complaining about a late train.",
    "Rewrite in other words: The battery life of this phone is excellent.",
    "Is this review positive or negative? 'The plot was dull and the acting was worse.'",
    "Give a short product review of a pair of running shoes.",
    "Paraphrase: I would not recommend this hotel to anyone.",
    "Write a one-sentence movie review that is mildly positive.",
    "Describe a disappointing meal in one sentence.",
]


def child(engine: str, n: int, max_tokens: int, threads: int) -> dict:
    setup_env()
    from checkray.actors.llm.packaged import resolve_llm
    from checkray.engine.llm import GenerationParams, count_finish_reasons

    gguf = Path(resolve_llm("builtin:qwen2.5-0.5b-instruct"))
    result: dict = {"engine": engine}
    start = time.perf_counter()
    if engine == "llamacpp":
        from checkray.actors.llm.local_xllamacpp import XLlamaCppGenerator

        gen = XLlamaCppGenerator(str(gguf), n_ctx=1024, threads=threads)
    elif engine == "llama-cpp-python":
        from checkray.actors.llm.local_llamacpp import LlamaCppGenerator

        gen = LlamaCppGenerator(str(gguf), n_ctx=1024, threads=threads)
    else:
        from checkray.actors.llm.local_transformers import TransformersGenerator, convert_gguf, converted_dir

        if not (converted_dir(gguf) / "config.json").is_file():
            t0 = time.perf_counter()
            convert_gguf(gguf)
            result["convert_s"] = time.perf_counter() - t0
            start = time.perf_counter()
        gen = TransformersGenerator(str(gguf), threads=threads)
    result["load_s"] = time.perf_counter() - start
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(n)]
    params = GenerationParams(temperature=0.0, max_tokens=max_tokens)
    gen.chat([[{"role": "user", "content": "Hi"}]], GenerationParams(max_tokens=2))  # warm-up
    t0 = time.perf_counter()
    outs = gen.chat([[{"role": "user", "content": p}] for p in prompts], params)
    result["gen_s"] = time.perf_counter() - t0
    result["completion_tokens"] = sum(o.completion_tokens for o in outs)
    result["prompt_tokens"] = sum(o.prompt_tokens for o in outs)
    result["tok_s"] = result["completion_tokens"] / result["gen_s"]
    result["finish"] = count_finish_reasons(outs)
    result["sample"] = outs[0].text[:80]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="chat prompts per engine")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs per engine; best kept")
    parser.add_argument("--engines", default=None, help="comma-separated; default: every installed engine")
    parser.add_argument("--baseline", default="transformers", help="the engine the ratio divides by")
    parser.add_argument("--quick", action="store_true", help="2 prompts x 8 tokens, one round: proves the script works")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=["llamacpp", "llama-cpp-python", "transformers"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n, args.max_tokens, args.rounds = 2, 8, 1
    if args.child:
        emit_child_result(child(args.engine, args.n, args.max_tokens, args.threads))
        return
    setup_env()
    script = Path(__file__).resolve()
    common_args = ["--n", str(args.n), "--max-tokens", str(args.max_tokens), "--threads", str(args.threads)]
    from checkray.engine.llm import llamacpp_importable

    engines = ["llamacpp", *(["llama-cpp-python"] if llamacpp_importable() else []), "transformers"]
    if args.engines:
        engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if "llamacpp" not in engines or args.baseline not in engines or args.baseline == "llamacpp":
        parser.error("--engines must include llamacpp and the --baseline engine (not llamacpp itself)")
    runs: dict[str, list[dict]] = {engine: [] for engine in engines}
    for _ in range(max(1, args.rounds)):
        for engine in runs:
            runs[engine].append(run_child(script, ["--engine", engine, *common_args]))
    results = {e: max(rs, key=lambda r: r["tok_s"]) for e, rs in runs.items()}
    for engine, rs in runs.items():  # a one-time conversion happens in the first round only
        converts = [r["convert_s"] for r in rs if "convert_s" in r]
        if converts:
            results[engine]["convert_s"] = converts[0]
    lines = []
    for engine, r in results.items():
        if "convert_s" in r:
            lines.append((f"{engine} one-time GGUF->safetensors", f"{r['convert_s']:.1f} s"))
        lines += [
            (f"{engine} load", f"{r['load_s']:.2f} s"),
            (f"{engine} rounds tok/s", ", ".join(f"{x['tok_s']:.1f}" for x in runs[engine])),
            (
                f"{engine} decode",
                f"{r['tok_s']:.1f} tok/s ({r['completion_tokens']} tokens in {r['gen_s']:.1f} s, finish {r['finish']})",
            ),
            (f"{engine} sample", repr(r["sample"])),
        ]
    ratio = results["llamacpp"]["tok_s"] / results[args.baseline]["tok_s"]
    if "llama-cpp-python" in results:
        lines.append(
            (
                "llama-cpp-python / xllamacpp tok/s",
                f"{results['llama-cpp-python']['tok_s'] / results['llamacpp']['tok_s']:.2f}x",
            )
        )
    else:
        lines.append(("llama-cpp-python", "not installed (opt-in: make setup-llamacpp)"))
    report(
        "llm_backends",
        lines,
        ratio,
        f"llama.cpp (xllamacpp) >= 1x {args.baseline} tok/s (default engine)",
        ratio >= 1.0,
        extra={"results": results, "rounds": runs},
    )


if __name__ == "__main__":
    main()
