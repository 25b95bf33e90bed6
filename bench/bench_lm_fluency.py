"""Can a packaged causal LM's score stand in for a reader's "fluent" verdict?

Scores the distinct single-text cases of the annotation batches (``bench/data/annotations``)
with the packaged Qwen2.5-Coder-0.5B on transformers: the mean and the lowest token
log-probability, and SLOR (each token's log-probability minus its context-free one, the
acceptability measure of Lau et al. 2017), then prints the ROC AUC of each score against
the stored ``fluent`` verdicts, overall and per generator. An AUC near 0.5 means the score
does not tell the readers' fluent cases from the others.

    .venv/bin/python bench/bench_lm_fluency.py [--per-cell 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

from common import setup_env  # noqa: E402

from checkray.engine.suite_validity import jsonl_records  # noqa: E402

GENERATORS = ("mft", "testaug", "s2lct_seed", "s2lct_expansion", "templates")
ANNOTATIONS = Path(__file__).parent / "data" / "annotations"


def judged_texts(per_cell: int, seed: int) -> list[tuple[str, str, int]]:
    """Up to ``per_cell`` distinct texts per (generator, fluent verdict)."""
    first: dict[str, tuple[str, int]] = {}
    for path in sorted(ANNOTATIONS.glob("*.jsonl")):
        for _, r in jsonl_records(path):
            if r.get("text_pair") or r.get("fluent") is None or r["generator"] not in GENERATORS:
                continue
            first.setdefault(r["text"], (r["generator"], int(r["fluent"])))
    items = [(g, t, f) for t, (g, f) in first.items()]
    random.Random(seed).shuffle(items)
    cells: dict[tuple[str, int], list] = {}
    for item in items:
        cells.setdefault((item[0], item[2]), []).append(item)
    return [item for key in sorted(cells) for item in cells[key][:per_cell]]


def scores(texts: list[str], threads: int) -> list[dict[str, float]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from checkray.actors.llm.local_transformers import convert_gguf
    from checkray.actors.llm.packaged import resolve_llm

    torch.set_num_threads(threads)
    path = convert_gguf(Path(resolve_llm("builtin:qwen2.5-0.5b-instruct")))
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path)).eval()
    bos = tok("<|endoftext|>", return_tensors="pt").input_ids
    with torch.no_grad():
        context_free = torch.log_softmax(model(bos).logits[0, -1], -1)
    out = []
    for text in texts:
        ids = torch.cat([bos, tok(text, return_tensors="pt").input_ids], 1)
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, :-1], -1)
        target = ids[0, 1:]
        lp = logp[torch.arange(len(target)), target]
        slor = lp - context_free[target]
        out.append(
            {
                "mean": float(lp.mean()),
                "min": float(lp.min()),
                "slor": float(slor.mean()),
                "min_slor": float(slor.min()),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-cell", type=int, default=40, help="texts per generator and verdict")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    setup_env()
    from sklearn.metrics import roc_auc_score

    items = judged_texts(args.per_cell, args.seed)
    start = time.perf_counter()
    scored = scores([t for _, t, _ in items], args.threads)
    counts: dict[str, list[int]] = {}
    for g, _, f in items:
        counts.setdefault(g, [0, 0])[f] += 1
    print(
        f"{len(items)} distinct judged texts scored in {time.perf_counter() - start:.0f} s; (not fluent, fluent) per generator:"
    )
    print("  " + ", ".join(f"{g} {c[0]}/{c[1]}" for g, c in sorted(counts.items())))
    for key in ("mean", "min", "slor", "min_slor"):
        overall = roc_auc_score([f for _, _, f in items], [s[key] for s in scored])
        per = []
        for g in sorted(counts):
            ys = [f for (gg, _, f) in items if gg == g]
            if len(set(ys)) == 2:
                xs = [s[key] for (gg, _, _), s in zip(items, scored) if gg == g]
                per.append(f"{g} {roc_auc_score(ys, xs):.2f}")
        print(f"{key:9s} AUC {overall:.3f}  ({', '.join(per)})")


if __name__ == "__main__":
    main()
