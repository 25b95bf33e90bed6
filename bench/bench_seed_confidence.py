"""Does a cross-fitted classifier tell the S²LCT seeds people read wrong from the others?

S²LCT's ``seed-label-confidence`` check (``engine/s2lct/confidence.py``) keeps a polar
seed only when a logistic regression on sentence embeddings, cross-fitted on the searched
corpus, gives the seed's sentence its corpus label with probability >= a threshold. This
bench replays that on the seeds already read (``bench/data/annotations``, generator
``s2lct_seed``, labels from the corpus): each seed's sentence is found by the corpus id in
its ``source``, the searched corpus is rebuilt (the bundled Rotten Tomatoes sentences: the
read ones plus others drawn to ``--search-size``, as the demo searches 2,000; SST-2 test
from ``--sst2`` when the file is there, whole, as at size), and the check's own function
scores it. Printed per encoder: ROC AUC of the score against the ``label_valid`` verdicts,
and at each threshold the share of seeds kept and the share of those read right.

    .venv/bin/python bench/bench_seed_confidence.py [--encoders builtin:mpnet,builtin:minilm]
        [--versions 464abbc,8b11f2e,ce38238] [--sst2 ../shared/data/sst2/test.json]

``--versions``: only batches of these code versions (default: every batch). Batches drawn
after the check existed passed it, so leave them out when judging the check itself.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
from common import setup_env  # noqa: E402

from checkray.engine.suite_validity import jsonl_records  # noqa: E402

ANNOTATIONS = Path(__file__).parent / "data" / "annotations"
THRESHOLDS = (0.6, 0.7, 0.8, 0.9)


def read_seeds(versions: list[str]) -> list[dict]:
    """Judged seeds labeled from the corpus: corpus id, verdict, batch."""
    out = []
    for path in sorted(ANNOTATIONS.glob("*s2lct_seed.jsonl")):
        meta = json.loads(path.with_name(path.name.replace(".jsonl", ".meta.json")).read_text())
        version = str(meta.get("code_version", ""))
        if versions and not any(version.startswith(v) for v in versions):
            continue
        for _, r in jsonl_records(path):
            m = re.search(r" on (\S+);", r["source"])
            if m and "label from corpus" in r["source"] and r.get("label_valid") is not None:
                out.append({"id": m.group(1), "valid": int(r["label_valid"]), "batch": path.stem})
    return out


def corpora(seeds: list[dict], search_size: int, sst2: Path) -> dict[str, tuple[list, list, list]]:
    """Searched corpora as the runs searched them: name -> (ids, texts, labels)."""
    from checkray.engine.corpus import _builtin

    rt = _builtin("rotten_tomatoes").to_pydict()
    index = {i: k for k, i in enumerate(rt["id"])}
    read = sorted({index[s["id"]] for s in seeds if s["id"] in index})
    rest = np.setdiff1d(np.arange(len(rt["id"])), read)
    drawn = np.random.default_rng(0).choice(rest, max(0, min(len(rest), search_size - len(read))), replace=False)
    rows = sorted(set(read) | set(drawn.tolist()))
    out = {
        "rotten_tomatoes": (
            [rt["id"][i] for i in rows],
            [rt["text"][i] for i in rows],
            [str(rt["label"][i]) for i in rows],
        )
    }
    if sst2.exists():
        data = json.loads(sst2.read_text())
        out["sst2"] = (list(data), [v[0] for v in data.values()], [str(v[1]) for v in data.values()])
    return out


def scores(encoder: str, corpus: dict[str, tuple[list, list, list]]) -> dict[str, float]:
    from checkray.actors.embedder import load_sentence_transformer
    from checkray.engine.label_classifier import cross_fitted_confidence

    name, _, backend = encoder.partition("@")
    model = load_sentence_transformer(name, backend=backend or None)
    out: dict[str, float] = {}
    for ids, texts, labels in corpus.values():
        start = time.perf_counter()
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True)
        print(f"  {encoder}: {len(texts)} sentences embedded in {time.perf_counter() - start:.1f}s")
        out.update(zip(ids, cross_fitted_confidence(vectors, labels).tolist()))
    return out


def report(encoder: str, seeds: list[dict], p: dict[str, float]) -> None:
    from sklearn.metrics import roc_auc_score

    rows = [(p[s["id"]], s["valid"]) for s in seeds if s["id"] in p and not np.isnan(p[s["id"]])]
    s, v = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
    auc = roc_auc_score(v, s) if 0 < v.sum() < len(v) else float("nan")
    print(f"{encoder}: {len(v)} seeds, {int((v == 0).sum())} read wrong, {v.mean():.1%} right; ROC AUC {auc:.3f}")
    for t in THRESHOLDS:
        keep = s >= t
        right = v[keep].mean() if keep.any() else float("nan")
        removed = int(((~keep) & (v == 0)).sum())
        print(f"  p >= {t}: keeps {keep.mean():.1%}, of which {right:.1%} right; removes {removed} of the wrong")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--encoders", default="builtin:mpnet,builtin:minilm", help="comma-separated; name@onnx-int8 for int8"
    )
    ap.add_argument("--versions", default="", help="comma-separated code versions (default: every batch)")
    ap.add_argument("--search-size", type=int, default=2000, help="Rotten Tomatoes sentences searched (the demo's)")
    ap.add_argument("--sst2", type=Path, default=Path("../shared/data/sst2/test.json"))
    args = ap.parse_args()
    setup_env()
    seeds = read_seeds([v for v in args.versions.split(",") if v])
    if not seeds:
        raise SystemExit("no judged S²LCT seeds labeled from the corpus in bench/data/annotations")
    corpus = corpora(seeds, args.search_size, args.sst2)
    print(f"{len(seeds)} judged seeds from {len({s['batch'] for s in seeds})} batches; corpora: {', '.join(corpus)}")
    for encoder in [e for e in args.encoders.split(",") if e]:
        report(encoder, seeds, scores(encoder, corpus))


if __name__ == "__main__":
    main()
