"""TestAug's validity filter (§4.2), the pure part: the classifier backends (records of
``VALIDITY_BACKENDS``), annotation files, the two-phase rule's thresholds and phase-1
decision, and the LLM labeler (``llm_label``: prompts rendered, answers parsed; the chat
is passed in). Who judges which case: ``engine/testaug/judges.py``.

Phase 1: a first sample of the generated cases of a description is annotated (by people
when an annotation file covers it, else by the LLM labeler, else by the classifier). When
the valid share reaches the task's threshold (90 % sentiment and paraphrase, 80 % NLI) the
description needs no filter. Phase 2: otherwise a validity classifier, trained on
annotated cases (``checkray validity train``), decides case by case.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from checkray.engine.errors import InputError
from checkray.engine.lazy import LazyRegistry
from checkray.engine.llm import GenerationParams
from checkray.engine.prompts import load_prompt
from checkray.engine.schema import normalize_text
from checkray.engine.testaug.prompt import ParseCount


@dataclass(frozen=True)
class ValidityBackend:
    """A kind of validity classifier. ``ref``: its model class in ``actors/testaug/``
    (``fit``, ``predict_proba``, ``save``, ``load``; the ``ValidityModel`` protocol there)."""

    name: str
    ref: str
    # The encoder it scores best with on TestAug's annotations (docs/testaug.md, Measured):
    # a frozen mpnet under a logistic head is worse than MiniLM (0.713 vs 0.815), while
    # mpnet fine-tuned end to end is the best classifier measured.
    default_encoder: str
    # Trains in seconds: refitted on every case once calibration chose its threshold, and
    # never worth a cluster GPU; the others train for minutes (a one-GPU Ray task on a cluster).
    quick: bool = False


VALIDITY_BACKENDS: LazyRegistry[type] = LazyRegistry("validity backend")
for _backend in [
    # sentence embeddings + a class-balanced logistic regression
    ValidityBackend("embedding_lr", "checkray.actors.testaug.validity:EmbeddingHead", "builtin:minilm", quick=True),
    # the encoder's transformer fine-tuned with a classification head (the paper's classifier)
    ValidityBackend("finetune", "checkray.actors.testaug.validity:FineTunedEncoder", "builtin:mpnet"),
]:
    VALIDITY_BACKENDS.register(_backend)


Task = Literal["sentiment", "paraphrase", "nli"]
THRESHOLDS: dict[str, float] = {"sentiment": 0.9, "paraphrase": 0.9, "nli": 0.8}


def threshold_for(task: str, override: float | None = None) -> float:
    if override is not None:
        return override
    if task not in THRESHOLDS:
        raise InputError(f"unknown task '{task}' (have: {', '.join(THRESHOLDS)})")
    return THRESHOLDS[task]


@dataclass(frozen=True)
class PhaseDecision:
    """Outcome of phase 1 for one description."""

    n: int  # annotated cases in the first sample
    valid: int
    threshold: float
    source: str  # who annotated: "people", "llm", "classifier", "none"

    @property
    def valid_share(self) -> float | None:
        return self.valid / self.n if self.n else None

    @property
    def needs_filter(self) -> bool:
        """Filter unless the first sample is predominately valid (an empty sample filters)."""
        share = self.valid_share
        return share is None or share < self.threshold


def phase_decision(flags: list[bool | None], threshold: float, source: str) -> PhaseDecision:
    """Phase-1 decision from the validity flags of a first sample (None: unknown, ignored)."""
    known = [f for f in flags if f is not None]
    return PhaseDecision(len(known), sum(bool(f) for f in known), threshold, source if known else "none")


def _as_validity(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "valid", "invalid", "true", "false"):
        return int(value.strip().lower() in ("1", "valid", "true"))
    raise InputError(f"{where}: 'validity' must be 0/1, true/false or valid/invalid, got {value!r}")


# Annotations kept as tables by other tools (a spreadsheet's CSV, a dataframe's Parquet):
# read through the corpus reader; JSON Lines (TestAug's format) line by line below, so an
# error names its line.
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq", ".json")


def read_annotations(path: str | Path) -> list[dict[str, Any]]:
    """Annotated cases: ``text`` and ``validity`` required; ``text_pair`` and ``description``
    optional. JSON Lines (the format of TestAug's released annotation files), or a CSV, TSV,
    Parquet or JSON table with those columns."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: annotation file not found")
    if p.suffix.lower() in TABLE_SUFFIXES:
        from checkray.engine.corpus import read_table_file

        table = read_table_file(str(p), kind="annotation")
        records = [(f"{p}: row {number}", raw) for number, raw in enumerate(table.to_pylist(), 1)]
    else:
        records = list(_json_lines(p))
    rows = [_annotation(raw, where) for where, raw in records]
    if not rows:
        raise InputError(f"{p}: annotation file has no rows")
    return rows


def _json_lines(p: Path):
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{p}: annotation file is not UTF-8 text") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{p}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: bad JSON line: {exc.msg} (column {exc.colno})") from None
        yield where, raw


def _annotation(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: an annotation is a JSON object, got {type(raw).__name__}")
    for column in ("text", "validity"):
        if column not in raw:
            raise InputError(f"{where}: missing '{column}' column (have: {', '.join(sorted(raw)) or 'nothing'})")
    if not isinstance(raw["text"], str) or not raw["text"].strip():
        raise InputError(f"{where}: 'text' must be a non-empty string")
    pair = raw.get("text_pair")
    description = raw.get("description")
    return {
        "text": raw["text"],
        "text_pair": pair if isinstance(pair, str) and pair else None,
        "description": description if description not in ("", None) else None,
        "validity": _as_validity(raw["validity"], where),
    }


@dataclass(frozen=True)
class RepeatedAnnotations:
    """Cases (description, text and pair, compared by ``normalize_text``, the key of every
    generated suite) annotated more than once."""

    texts: int  # distinct cases annotated more than once
    rows: int  # the rows they take up
    conflicting: tuple[str, ...]  # those annotated both valid and invalid

    def describe(self) -> str:
        return (
            f"{self.texts} text{'' if self.texts == 1 else 's'} annotated more than once ({self.rows} rows), "
            f"{len(self.conflicting)} of them both valid and invalid"
        )


def repeated_annotations(rows: list[dict[str, Any]]) -> RepeatedAnnotations:
    """Where annotators disagree with each other on the very same case: such cases bound the
    accuracy any classifier can reach, and a user should know how many there are (TestAug's
    sentiment file: 14 repeated texts, 11 of them labelled both ways; docs/testaug.md)."""
    labels: dict[tuple[str, ...], list[int]] = {}
    first: dict[tuple[str, ...], str] = {}
    for r in rows:
        # the description too: a sentence may be valid for one description and not another
        key = tuple(normalize_text(str(r.get(k) or "")) for k in ("description", "text", "text_pair"))
        labels.setdefault(key, []).append(int(r["validity"]))
        first.setdefault(key, r["text"])
    repeated = [k for k, got in labels.items() if len(got) > 1]
    return RepeatedAnnotations(
        texts=len(repeated),
        rows=sum(len(labels[k]) for k in repeated),
        conflicting=tuple(first[k] for k in repeated if len(set(labels[k])) > 1),
    )


def classifier_input(text: str, text_pair: str | None = None, description: str | None = None) -> str:
    """What a validity classifier reads: the text, and for pairs both texts; led by the
    description the case is judged against when one classifier judges several (validity is
    relative to a description: the same sentence can be valid for one and not another)."""
    case = text if not text_pair else f"{text} [SEP] {text_pair}"
    return f"{' '.join(description.split())} [SEP] {case}" if description else case


_VALID = re.compile(r"\b(invalid|not valid|valid|yes|no)\b", re.IGNORECASE)


def parse_validity_answer(raw: str) -> bool | None:
    """The LLM labeler's verdict: the first of valid/invalid/yes/no it writes; None if none."""
    m = _VALID.search(raw or "")
    if not m:
        return None
    word = m.group(1).lower()
    return word in ("valid", "yes")


def case_text(text: str, text_pair: str | None) -> str:
    """A case as the labeler reads it: the text, or the pair as ``a / b``."""
    return text if not text_pair else f"{text} / {text_pair}"


def llm_label(cases: Sequence[dict], chat, params: GenerationParams, count: ParseCount) -> list[bool | None]:
    """The LLM labeler's verdict per case (``description``, ``text``, ``text_pair`` keys;
    optional ``examples``: valid cases of the description, e.g. its seed cases, shown to
    the labeler with the ``testaug_validity_examples`` prompt); None where its answer
    names no verdict (counted in ``count``). ``chat(messages_list, params)`` is the LLM."""
    if not cases:
        return []
    plain, shown = load_prompt("testaug_validity"), load_prompt("testaug_validity_examples")
    messages = [
        shown.render(
            description=c["description"],
            examples="\n".join(f"- {e}" for e in c["examples"]),
            case=case_text(c["text"], c.get("text_pair")),
        )
        if c.get("examples")
        else plain.render(description=c["description"], case=case_text(c["text"], c.get("text_pair")))
        for c in cases
    ]
    verdicts = []
    for out in chat(messages, params):
        count.outputs += 1
        verdict = parse_validity_answer(out.text)
        if verdict is None:
            count.miss(out.text or f"({out.finish_reason})")
        else:
            count.items += 1
        verdicts.append(verdict)
    return verdicts
