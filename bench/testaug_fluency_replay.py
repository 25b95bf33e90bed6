"""TestAug's expansion fluency check replayed on expansion cases people read.

Takes each annotated expansion's source sentence from the case itself (its ``source``:
"expansion of [template] from: <source>", as ``bench/annotate.py`` writes it), or joins the
cases to the run's ``expand`` table (``--expansion``: ``text``, ``source``), then scores each case and its source with the check's scorer
(``actors/lm_scorer.CausalLMScorer``), takes the drop as the check does
(``engine/lm_fluency.sentence_drop``), and prints the ROC AUC of the drop against the
readers' ``fluent`` and all-three verdicts, then per ``max_drop`` how many read cases the
check keeps and how many of those and of the refused ones were read right.

    .venv/bin/python bench/testaug_fluency_replay.py \
        --batches dev-atsize-a4cb394-small-testaug-expansions [--limits 3,5,8] \
        [--expansion RUN/stages/expand/data.parquet]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import setup_env  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
_FROM = " from: "


def source_in_case(row: dict) -> str | None:
    """The sentence an annotated expansion was filled from, as its review names it."""
    source = row.get("source") or ""
    if not source.startswith("expansion of ") or _FROM not in source:
        return None
    return source.split(_FROM, 1)[1]


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
    parser.add_argument(
        "--expansion", help="the run's expand table (parquet: text, text_pair, source); default: each case's own source"
    )
    parser.add_argument("--batches", required=True, help="annotation batches, comma-separated")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--limits", default="3,5,8")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()

    judged = read_judged(args.batches.split(","))
    if args.expansion:
        table = {(r["text"], r["text_pair"]): r["source"] for r in pq.read_table(args.expansion).to_pylist()}
        source_of = [table.get((r["text"], r["text_pair"])) for r in judged]
    else:
        source_of = [source_in_case(r) for r in judged]
    rows = [(r, (src, None)) for r, src in zip(judged, source_of) if src]  # sentiment: one text
    if not rows:
        raise SystemExit("no annotated expansion case with a known source in the given batches")
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
