"""TestAug's expansion fluency check replayed on expansion cases people read.

Joins the annotated TestAug cases of the given batches (``bench/data/annotations``) to the
expansion cases of the run they came from (its ``expand`` stage, or a saved copy of that
table: ``text``, ``source``), scores each case and its source with the check's scorer
(``actors/lm_scorer.CausalLMScorer``), takes the drop as the check does
(``engine/lm_fluency.sentence_drop``), and prints the ROC AUC of the drop against the
readers' ``fluent`` and all-three verdicts, then per ``max_drop`` how many read cases the
check keeps and how many of those and of the refused ones were read right.

    .venv/bin/python bench/testaug_fluency_replay.py --expansion RUN/stages/expand/data.parquet \
        --batches dev-atsize-XXXX-testaug [--limits 3,5,8]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import setup_env  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"


def read_judged(batches: list[str]) -> list[dict]:
    """The judged TestAug cases of the batches (names in ``bench/data/annotations`` without
    ``.jsonl``, or paths of batch files)."""
    out = []
    for name in batches:
        path = Path(name) if name.endswith(".jsonl") else ANNOTATIONS / f"{name}.jsonl"
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["generator"] == "testaug" and r.get("fluent") is not None:
                out.append(r)
    return out


def main() -> None:
    setup_env()
    import numpy as np
    import pyarrow.parquet as pq
    from sklearn.metrics import roc_auc_score

    from checkray.actors.lm_scorer import CausalLMScorer
    from checkray.engine.lm_fluency import DEFAULT_MODEL, sentence_drop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expansion", required=True, help="the run's expand table (parquet: text, text_pair, source)")
    parser.add_argument("--batches", required=True, help="annotation batches, comma-separated")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--limits", default="3,5,8")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    source_of = {(r["text"], r["text_pair"]): r["source"] for r in pq.read_table(args.expansion).to_pylist()}
    judged = [r for r in read_judged(args.batches.split(",")) if (r["text"], r["text_pair"]) in source_of]
    rows = [(r, (source_of[(r["text"], r["text_pair"])], None)) for r in judged]  # sentiment: one text
    sentences = sorted({t for r, src in rows for t in (r["text"], src[0])})
    start = time.perf_counter()
    scores = dict(zip(sentences, CausalLMScorer(args.model, args.threads).logprobs(sentences)))
    print(f"{len(rows)} read expansion cases, {len(sentences)} sentences scored in {time.perf_counter() - start:.1f} s")

    drop = np.array([sentence_drop(src, (r["text"], r["text_pair"]), scores) for r, src in rows])
    fluent = np.array([r["fluent"] for r, _ in rows])
    right = np.array([r["label_valid"] * r["fluent"] * r["on_capability"] for r, _ in rows])
    for name, verdict in (("fluent", fluent), ("all three", right)):
        auc = roc_auc_score(verdict, -drop) if 0 < verdict.sum() < len(verdict) else float("nan")
        print(f"ROC AUC of -drop against {name}: {auc:.3f} ({verdict.sum()} of {len(verdict)} yes)")
    print("| max_drop | kept | fluent among kept | all three among kept | refused: fluent / all |")
    print("| --- | --- | --- | --- | --- |")
    for limit in [float(x) for x in args.limits.split(",")]:
        kept = drop <= limit
        shares = [f"{100 * v[kept].mean():.1f} %" if kept.any() else "-" for v in (fluent, right)]
        print(
            f"| {limit:g} | {kept.sum()} ({100 * kept.mean():.0f} %) | {shares[0]} | {shares[1]} | "
            f"{fluent[~kept].sum()} / {(~kept).sum()} |"
        )
    for (r, src), d in sorted(zip(rows, drop), key=lambda x: -x[1]):
        print(f"{d:6.1f}  fluent={r['fluent']}  {r['text']!r}  <- {src[0]!r}")


if __name__ == "__main__":
    main()
