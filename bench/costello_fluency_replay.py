"""COSTELLO's LM fluency check replayed on the triples people read.

Scores every seed and edited sentence of the annotated COSTELLO triples
(``bench/data/annotations``, any version) with the check's scorer
(``actors/lm_scorer.CausalLMScorer``), takes each triple's drop as the check does
(``engine/lm_fluency.sentence_drop``, over the edits the check scores: both for CR1
and CR4, CR2's farther and CR3's closer), and prints, per CR and ``max_drop``, how many
triples the check would keep and how many of those were read right on all three, with
the ROC AUC of the drop against the readers' ``fluent`` and all-three verdicts.

    .venv/bin/python bench/costello_fluency_replay.py [--model builtin:smollm2-135m-instruct] [--limits 3,5,8] \
        [--versions 2039ee4,3dc7a3c]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import setup_env  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
SCORED_EDITS = {"CR1": ("closer", "farther"), "CR2": ("farther",), "CR3": ("closer",), "CR4": ("closer", "farther")}


def read_triples(versions: list[str]) -> list[dict]:
    """Distinct judged COSTELLO triples (seed, closer, farther), first verdict kept; only
    batches whose file name holds one of ``versions`` when given."""
    seen, out = set(), []
    for path in sorted(ANNOTATIONS.glob("*.jsonl")):
        if versions and not any(v in path.name for v in versions):
            continue
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if not r["generator"].startswith("costello_cr") or r.get("label_valid") is None:
                continue
            key = (r["text"], r["closer"], r["farther"])
            if key not in seen:
                seen.add(key)
                out.append(r)
    return out


def parts(text: str) -> tuple[str, str | None]:
    """An annotation's pair text "a [SEP] b" as (a, b)."""
    a, _, b = text.partition(" [SEP] ")
    return (a.strip(), b.strip() or None)


def main() -> None:
    setup_env()
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from checkray.actors.lm_scorer import CausalLMScorer
    from checkray.engine.lm_fluency import sentence_drop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="builtin:smollm2-135m-instruct")
    parser.add_argument("--limits", default="3,5,8")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--versions", default="", help="only batches of these code versions (comma-separated)")
    args = parser.parse_args()

    triples = read_triples([v for v in args.versions.split(",") if v])
    sentences = sorted({p for r in triples for k in ("text", "closer", "farther") for p in parts(r[k]) if p})
    start = time.perf_counter()
    scorer = CausalLMScorer(args.model, args.threads)
    scores = dict(zip(sentences, scorer.logprobs(sentences)))
    print(
        f"{len(triples)} triples read, {len(sentences)} sentences scored by {args.model} in "
        f"{time.perf_counter() - start:.1f} s"
    )
    limits = [float(x) for x in args.limits.split(",")]
    head = ["CR", "read", "right (all three)", "AUC fluent", "AUC all three"]
    for t in limits:
        head += [f"kept at {t:g}", "right", "rejected: right / all"]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for cr, edits in SCORED_EDITS.items():
        rows = [r for r in triples if r["capability"] == cr]
        if not rows:
            continue
        drop = np.array([max(sentence_drop(parts(r["text"]), parts(r[k]), scores) for k in edits) for r in rows])
        fluent = np.array([r["fluent"] for r in rows])
        right = np.array([r["label_valid"] * r["fluent"] * r["on_capability"] for r in rows])
        cells = [f"{cr} ({' and '.join(edits)})", str(len(rows)), f"{100 * right.mean():.1f} %"]
        for verdict in (fluent, right):
            auc = roc_auc_score(verdict, -drop) if 0 < verdict.sum() < len(verdict) else float("nan")
            cells.append(f"{auc:.3f}")
        for t in limits:
            kept = drop <= t
            share = f"{100 * right[kept].mean():.1f} %" if kept.any() else "-"
            cells += [f"{kept.sum()} ({100 * kept.mean():.0f} %)", share, f"{right[~kept].sum()} / {(~kept).sum()}"]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
