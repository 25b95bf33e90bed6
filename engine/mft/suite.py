"""Pure stages of the ``mft`` job (Li et al. §2.2–2.4): few-shot examples, MFT
generation from representative documents, de-duplication, paraphrases, label gate, and
the suites of the kept cases (``to_suite``).

The LLM is passed in as ``chat(messages_list, params) -> list[Generation]`` so these
functions are pure given it (the job passes a Ray actor pool; tests pass a recorded
or rule-based chat). Every gate counts what it kept and dropped in a ``GateLog``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.labels import suggest_flag
from checkray.engine.llm import Generation, GenerationParams
from checkray.engine.mft.parsing import (
    ParseStats,
    dedupe_exact,
    dedupe_near,
    format_mft_cases,
    parse_label,
    parse_mft_cases,
    parse_paraphrases,
)
from checkray.engine.prompts import PromptTemplate, load_prompt
from checkray.engine.schema import case_id, make_cases

Chat = Callable[[Sequence[Sequence[dict]], GenerationParams], list[Generation]]


def named_label_words(label_words: dict[str, str], names: dict[str, str] | None) -> dict[str, str]:
    """``mft.label_words`` keyed by label names: a key given as a raw corpus label (``0``)
    is translated through the corpus label map (``--labels 0=negative``), so the words can
    be written either way; a key that is already a name stays."""
    if not names:
        return dict(label_words)
    out = {names.get(key, key): word for key, word in label_words.items() if key not in names}
    out.update({names[key]: word for key, word in label_words.items() if key in names})  # raw keys win
    return out


def check_label_words(labels: set[str], label_words: dict[str, str], names: dict[str, str] | None) -> None:
    """A one-line error unless every corpus label (after the label map) has an answer word.
    Unnamed numeric labels point at ``--labels``; named ones at ``mft.label_words``."""
    unknown = sorted(labels - set(label_words), key=lambda v: (len(v), v))
    if not unknown:
        return
    if all(u.lstrip("-").isdigit() for u in unknown):
        raise InputError(
            f"corpus label(s) {', '.join(unknown)} have no name for the LLM's label check; "
            f"pass {suggest_flag(names, unknown)} (corpus.labels), e.g. --labels 0=negative,1=positive"
        )
    raise InputError(
        f"mft.label_words has no entry for corpus label(s) {unknown} (have {sorted(label_words)}); "
        f"add e.g. mft.label_words: {{{unknown[0]}: positive}} (the word the LLM labels with: positive or negative)"
    )


@dataclass
class GateLog:
    """Counts at every gate, in pipeline order, for the report."""

    rows: list[dict] = field(default_factory=list)
    parse: OrderedDict[str, ParseStats] = field(default_factory=OrderedDict)
    on_add: Callable[[dict], None] | None = None  # progress callback (the CLI prints each gate)

    def add(
        self, gate: str, split: str, version: int, kept: int, dropped: int, note: str = "", seconds: float | None = None
    ) -> None:
        row = {
            "gate": gate,
            "split": split,
            "version": version,
            "kept": kept,
            "dropped": dropped,
            "note": note,
            "seconds": None if seconds is None else round(seconds, 1),
        }
        self.rows.append(row)
        if self.on_add:
            self.on_add(row)

    def stats(self, name: str) -> ParseStats:
        return self.parse.setdefault(name, ParseStats())


def prompt_params(prompt: PromptTemplate, params: GenerationParams, *, constrained: bool) -> GenerationParams:
    """``params`` with the prompt file's GBNF grammar when decoding is constrained: the
    answer then always has the format the parser expects (small models otherwise drop
    half of it), and parsers stay lenient for backends that cannot enforce grammars."""
    if constrained and prompt.grammar and not params.grammar:
        return params.model_copy(update={"grammar": prompt.grammar})
    return params


def few_shot_examples(
    docs: Sequence[dict],
    chat: Chat,
    params: GenerationParams,
    rng: np.random.Generator,
    log: GateLog,
    *,
    max_tries: int = 3,
    constrained: bool = False,
) -> dict[str, dict]:
    """One worked example per label (Figure 5): a random document of that label and the
    MFT cases the LLM extracts from it. A label whose tries all fail to parse gets none."""
    prompt = load_prompt("mft_fewshot_example")
    params = prompt_params(prompt, params, constrained=constrained)
    by_label: dict[str, list[dict]] = {}
    for d in docs:
        if d["label"] is not None:
            by_label.setdefault(d["label"], []).append(d)
    examples = {}
    for label in sorted(by_label):
        pool = by_label[label]
        picks = rng.choice(len(pool), size=min(max_tries, len(pool)), replace=False)
        for pick in picks:
            doc = pool[int(pick)]
            out = chat([prompt.render(input_text=doc["text"])], params)[0]
            cases = parse_mft_cases(out.text, log.stats("few-shot example"))
            if cases:
                examples[label] = {"doc": doc, "cases": cases[:4]}
                break
    return examples


def generate_mfts(
    reps: Sequence[dict],
    examples: dict[str, dict],
    chat: Chat,
    params: GenerationParams,
    log: GateLog,
    *,
    batch: int = 8,
    constrained: bool = False,
) -> list[dict]:
    """MFT cases (Figure 6) for each representative document, guided by the example of
    the document's own label (a mismatched example biases the generated sentiment)."""
    prompt = load_prompt("mft_generate")
    params = prompt_params(prompt, params, constrained=constrained)
    usable = [r for r in reps if r["label"] in examples]
    requests = []
    for rep in usable:
        ex = examples[rep["label"]]
        requests.append(
            prompt.render(
                example_text=ex["doc"]["text"], example_cases=format_mft_cases(ex["cases"]), input_text=rep["text"]
            )
        )
    rows = []
    stats = log.stats("MFT generation")
    for start in range(0, len(requests), batch):
        outputs = chat(requests[start : start + batch], params)
        for rep, out in zip(usable[start : start + batch], outputs):
            for summary, review in parse_mft_cases(out.text, stats):
                rows.append(
                    {
                        "text": review,
                        "summary": summary,
                        "source_id": rep["id"],
                        "label": rep["label"],
                        "source_topic": rep["topic"],
                    }
                )
    return rows


def dedupe_cases(
    rows: list[dict], embed: Callable[[list[str]], np.ndarray], threshold: float
) -> tuple[list[dict], int, int]:
    """Exact then near-duplicate removal. Returns (kept rows, exact dropped, near dropped)."""
    exact = [rows[i] for i in dedupe_exact([r["text"] for r in rows])]
    if not exact:
        return [], len(rows), 0
    near = [exact[i] for i in dedupe_near(embed([r["text"] for r in exact]), threshold)]
    return near, len(rows) - len(exact), len(exact) - len(near)


def paraphrase_cases(
    rows: Sequence[dict],
    n: int,
    chat: Chat,
    params: GenerationParams,
    log: GateLog,
    *,
    batch: int = 8,
    constrained: bool = False,
) -> list[dict]:
    """``n`` rephrasings per MFT (§2.3 "Extended"), same label as the original."""
    if n <= 0 or not rows:
        return []
    prompt = load_prompt("mft_paraphrase")
    params = prompt_params(prompt, params, constrained=constrained)
    stats = log.stats("paraphrase")
    out_rows = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        outputs = chat([prompt.render(n=n, input_text=r["text"]) for r in chunk], params)
        for row, out in zip(chunk, outputs):
            for text in parse_paraphrases(out.text, row["text"], n, stats):
                out_rows.append({**row, "text": text, "paraphrase_of": row["text"]})
    return out_rows


def label_gate(
    rows: Sequence[dict],
    chat: Chat,
    params: GenerationParams,
    log: GateLog,
    *,
    batch: int = 16,
    constrained: bool = False,
    rejected: list[dict] | None = None,
) -> tuple[list[dict], dict[str, int]]:
    """LLM label check (§2.4.2): keep cases the LLM labels as their expected label word
    (``row["expected"]``, else ``row["label"]``); drop "hard to decide", the opposite
    label, and answers that cannot be read (appended to ``rejected``, check ``llm label``)."""
    prompt = load_prompt("mft_label")
    params = prompt_params(prompt, params, constrained=constrained)
    stats = log.stats("label check")
    kept, counts = [], {"agree": 0, "hard": 0, "disagree": 0, "unreadable": 0}
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        outputs = chat([prompt.render(input_text=r["text"]) for r in chunk], params)
        for row, out in zip(chunk, outputs):
            label, reason = parse_label(out.text, stats)
            expected = row.get("expected", row["label"])
            why = None
            if label is None:
                counts["unreadable"] += 1
                why = "the LLM's label answer could not be read"
            elif label == "hard":
                counts["hard"] += 1
                why = f"the LLM labels it hard to decide ({reason})"
            elif label != expected:
                counts["disagree"] += 1
                why = f"the LLM labels it {label}, not {expected} ({reason})"
            if why:
                if rejected is not None:
                    rejected.append({**row, "check": "llm label", "reason": " ".join(why.split())})
            else:
                counts["agree"] += 1
                kept.append({**row, "llm_label": label, "llm_reason": reason})
    return kept, counts


def to_suite(cases: pa.Table, generator: str) -> pa.Table:
    """The common-schema suites of the kept cases (with their ``mft_topic``): originals in
    ``mft-<split>-original`` and again in ``mft-<split>-extended`` with their paraphrases,
    so each suite is self-contained for the benchmark. The same text may be generated in
    two versions: case ids include the version."""
    rows = {}
    for r in cases.to_pylist():
        suites = [f"mft-{r['split']}-extended"] + ([] if r["paraphrase_of"] else [f"mft-{r['split']}-original"])
        for suite in suites:
            row = suite_row(r, suite, generator)
            rows[row["case_id"]] = row
    return make_cases(rows.values())


def suite_row(case: dict, suite: str, generator: str) -> dict:
    """One kept case as a row of ``suite`` (TEST_CASE_SCHEMA)."""
    return {
        "checks": case.get("checks"),
        "suite": suite,
        "method": "mft",
        "capability": case["source_topic"],
        "topic": case["mft_topic"],
        "text": case["text"],
        "expected_label": case["label"],
        "test_type": "MFT",
        "case_id": case_id(suite, case["version"], case["text"]),
        "provenance": {
            "source_id": case["source_id"],
            "template_id": "mft_paraphrase" if case["paraphrase_of"] else "mft_generate",
            "generator": generator,
            "seed": case["seed"],
        },
        "meta": {
            "version": case["version"],
            "split": case["split"],
            "summary": case["summary"],
            "paraphrase_of": case["paraphrase_of"],
            "llm_reason": case["llm_reason"],
        },
    }
