"""An encoder fine-tuned on sentiment first (an intermediate task), for ``bench_validity.py``.

mpnet fine-tuned on ``--n`` bundled Rotten Tomatoes sentences (negative/positive) for one
epoch; the encoder without its head is saved to ``--out``, which ``bench_validity.py``
takes as an encoder path (``--variants finetune:/path/to/out``). The question it answers:
does knowing sentiment first help a classifier of whether a sentence is a *negative
sentence with neutral content in the middle*? (docs/testaug.md, 2026-11-26 late night: no.)

    OMP_NUM_THREADS=2 .venv/bin/python bench/intermediate_encoder.py --n 4000 --out /tmp/mpnet-rt
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import setup_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000, help="Rotten Tomatoes sentences")
    parser.add_argument("--encoder", default="builtin:mpnet")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    setup_env()
    from checkray.actors.embedder import resolve_model
    from checkray.actors.zoo.trainers import fine_tune
    from checkray.engine.config import CorpusConfig
    from checkray.engine.corpus import read_corpus
    from checkray.engine.training import FineTuneConfig

    frame = read_corpus(CorpusConfig(path="builtin:rotten_tomatoes")).to_pandas().sample(n=args.n, random_state=0)
    texts, labels = frame["text"].tolist(), frame["label"].tolist()
    cfg = FineTuneConfig(train_size=None, epochs=1, max_length=64, batch_size=16, learning_rate=3e-5)
    start = time.perf_counter()
    model, tokenizer, details = fine_tune(resolve_model(args.encoder), texts, labels, sorted(set(labels)), cfg, seed=0)
    model.base_model.save_pretrained(args.out)  # the encoder; bench_validity adds a fresh head
    tokenizer.save_pretrained(args.out)
    print(
        f"{args.n} sentences, {details['steps']} steps, loss {details['loss_first']} -> {details['loss_last']}, "
        f"{time.perf_counter() - start:.0f} s; wrote {args.out}"
    )


if __name__ == "__main__":
    main()
