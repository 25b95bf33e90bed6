"""A tiny BERT sequence classifier built offline (no hub): a WordPiece vocabulary made
from the words of a few sentences, a small ``BertConfig`` and random weights. Tests of the
``hf`` adapter and of fine-tuning use it instead of a downloaded model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_bert(
    out: Path,
    sentences: Sequence[str],
    num_labels: int = 2,
    id2label: dict[int, str] | None = None,
    seed: int = 0,
    initializer_range: float = 0.02,
) -> Path:
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    words = sorted({w for s in sentences for w in re.findall(r"\w+|[^\w\s]", s.lower())})
    # transformers 5 takes the WordPiece vocabulary as ``vocab`` (a token -> id dict).
    tokenizer = BertTokenizerFast(vocab={tok: i for i, tok in enumerate(SPECIAL + words)}, do_lower_case=True)
    config = BertConfig(
        vocab_size=len(SPECIAL) + len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=num_labels,
        initializer_range=initializer_range,
        **({"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}} if id2label else {}),
    )
    torch.manual_seed(seed)
    BertForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
