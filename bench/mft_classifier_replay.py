"""The mft job's classifier check replayed on the MFT cases people read.

Fits the check's classifier (``engine/label_classifier.fitted_confidence``: a logistic
regression on ``--encoder`` embeddings of a seeded sample of the bundled Rotten Tomatoes
sentences, as ``mft.classifier_check`` does) and scores every distinct annotated MFT case
(``bench/data/annotations``) for its expected label; prints the ROC AUC of that probability
against the readers' label, on-capability and all-three verdicts, and per
``min_confidence`` how many cases the check keeps (with and without VADER's direction,
``engine/mft/checks.lexicon_disagreement_reason``) and how many of those were read right.

    .venv/bin/python bench/mft_classifier_replay.py [--encoder builtin:mpnet] [--train-size 2000] \
        [--thresholds 0.8,0.9,0.95] [--versions ae7f30d,0926741]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from common import setup_env  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
VERDICTS = ("label_valid", "fluent", "on_capability")


def read_cases(versions: list[str]) -> list[dict]:
    """Distinct judged MFT cases (by text, first verdict kept); only batches whose file
    name holds one of ``versions`` when given."""
    seen, out = set(), []
    for path in sorted(ANNOTATIONS.glob("*-mft.jsonl")):
        if versions and not any(v in path.name for v in versions):
            continue
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r.get("label_valid") is not None and r["text"] not in seen:
                seen.add(r["text"])
                out.append(r)
    return out


def share(mask, verdict) -> str:
    return f"{100 * verdict[mask].mean():.1f} %" if mask.any() else "-"


def main() -> None:
    setup_env()
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from checkray.actors.embedder import load_sentence_transformer
    from checkray.engine.corpus import _builtin, sample_rows
    from checkray.engine.label_classifier import fitted_confidence
    from checkray.engine.mft.checks import lexicon_disagreement_reason

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="builtin:mpnet")
    parser.add_argument("--train-size", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--thresholds", default="0.8,0.9,0.95")
    parser.add_argument("--versions", default="", help="only batches of these code versions (comma-separated)")
    args = parser.parse_args()

    cases = read_cases([v for v in args.versions.split(",") if v])
    corpus = sample_rows(_builtin("rotten_tomatoes"), args.train_size, args.seed)
    names = {"0": "negative", "1": "positive"}
    train_labels = [names.get(str(x), str(x)) for x in corpus.column("label").to_pylist()]
    start = time.perf_counter()
    model = load_sentence_transformer(args.encoder)
    texts = corpus.column("text").to_pylist() + [r["text"] for r in cases]
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    p = fitted_confidence(
        vectors[: corpus.num_rows], train_labels, vectors[corpus.num_rows :], [r["expected"] for r in cases]
    )
    print(
        f"{len(cases)} MFT cases read; {args.encoder} embedded {corpus.num_rows} + {len(cases)} sentences "
        f"and the classifier scored them in {time.perf_counter() - start:.1f} s"
    )
    verdict = {k: np.array([r[k] for r in cases]) for k in VERDICTS}
    right = verdict["label_valid"] * verdict["fluent"] * verdict["on_capability"]
    lexicon = np.array([lexicon_disagreement_reason(r["text"], r["expected"]) is None for r in cases])
    aucs = ", ".join(f"{k} {roc_auc_score(v, p):.3f}" for k, v in (*verdict.items(), ("all three", right)))
    print(f"ROC AUC of p against: {aucs}")
    print(
        f"before: label-valid {share(p == p, verdict['label_valid'])}, on-capability "
        f"{share(p == p, verdict['on_capability'])}, all three {share(p == p, right)}"
    )
    head = ["min_confidence", "VADER", "kept", "label-valid", "fluent", "on-capability", "all three"]
    print("| " + " | ".join(head) + " |\n|" + " --- |" * len(head))
    for t in (float(x) for x in args.thresholds.split(",")):
        for with_lexicon in (False, True):
            kept = (p >= t) & (lexicon if with_lexicon else True)
            cells = [f"{t:g}", "agrees" if with_lexicon else "-", f"{kept.sum()} ({100 * kept.mean():.0f} %)"]
            cells += [share(kept, verdict[k]) for k in VERDICTS] + [share(kept, right)]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
