"""One split x version of Li et al.'s generation (§2.2-2.4), step by step, and the tables
it leaves: the kept cases, the counts at every gate, what the parsers could read.

    few-shot examples -> MFT generation -> de-duplication -> paraphrases -> label check

Given the LLM (a ``StageChat``, whose answers the stage checkpoints) and the sentence
embedder, everything here is pure; the mft job's generate stages call ``generate_version``
and the collect stage ``collect_versions``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from checkray.engine.case_checks import Check, apply_checks, rejected_table
from checkray.engine.errors import EmptySuiteError
from checkray.engine.llm import GenerationParams
from checkray.engine.llm_checkpoint import StageChat
from checkray.engine.llm_output import duplicate_check
from checkray.engine.mft.checks import content_checks, near_duplicate_check, prompt_instructions
from checkray.engine.mft.suite import (
    GateLog,
    few_shot_examples,
    generate_mfts,
    label_gate,
    paraphrase_cases,
)
from checkray.engine.schema import normalize_text

# The fields of the mft section that one split x version reads: its stage is given a view
# of exactly these, so adding versions or models reuses every finished pair.
GENERATION_FIELDS = (
    "generation",
    "constrained",
    "near_duplicate_cosine",
    "paraphrase_limit",
    "paraphrases",
    "paraphrase_generation",
    "label_words",
    "label_check",
    "label_generation",
    "embedder",
    "near_copy_overlap",
)

CASE_ROW_SCHEMA = pa.schema(
    [
        ("text", pa.string()),
        ("summary", pa.string()),
        ("source_id", pa.string()),
        ("label", pa.string()),
        ("source_topic", pa.string()),
        ("paraphrase_of", pa.string()),
        ("split", pa.string()),
        ("version", pa.int64()),
        ("seed", pa.int64()),
        ("llm_reason", pa.string()),
        ("checks", pa.list_(pa.string())),  # the automatic checks it passed (engine/mft/checks.py)
    ]
)

GATE_SCHEMA = pa.schema(
    [
        ("gate", pa.string()),
        ("split", pa.string()),
        ("version", pa.int64()),
        ("kept", pa.int64()),
        ("dropped", pa.int64()),
        ("note", pa.string()),
        ("seconds", pa.float64()),  # wall time of the step in the run that computed the stage
    ]
)

PARSING_SCHEMA = pa.schema(
    [
        ("step", pa.string()),
        ("outputs", pa.int64()),
        ("items", pa.int64()),
        ("unparsed", pa.int64()),
        ("examples", pa.list_(pa.string())),
    ]
)

PARSE_COUNTS = ("outputs", "items", "unparsed")
PARSE_EXAMPLES = 3  # unparsed answers kept per step for the report


@dataclass(frozen=True)
class VersionTarget:
    """Which split x version is generated, and the seed it samples with (seed + version)."""

    split: str
    version: int
    seed: int


@dataclass
class Lap:
    """Seconds since the previous lap: the wall time of each step, for its gate row."""

    last: float = field(default_factory=time.perf_counter)

    def __call__(self) -> float:
        now = time.perf_counter()
        spent, self.last = now - self.last, now
        return spent


@dataclass
class VersionSteps:
    """The steps of one split x version; each step records its gate in ``log``.

    ``m`` is the mft section's view of ``GENERATION_FIELDS`` (or the whole section)."""

    m: Any
    chat: StageChat
    embed: Callable[[list[str]], np.ndarray]
    target: VersionTarget
    log: GateLog
    lap: Lap = field(default_factory=Lap)
    parse: Callable[[str], Any] | None = None  # a spaCy pipeline, for the pair-pronoun check
    rejected: list[dict] = field(default_factory=list)  # candidates a check rejected, with reasons
    seen: set = field(default_factory=set)  # normalized texts met in this version
    reps: dict[str, str] = field(default_factory=dict)  # representative id -> its text
    example_texts: dict[str, str] = field(default_factory=dict)  # label -> its few-shot example's texts
    # Originals rejected only as near-copies of their representative: not cases themselves,
    # but what the LLM extracted, so they are paraphrased after the kept ones (a paraphrase
    # passes the near-copy check against the representative itself).
    copies: list[dict] = field(default_factory=list)

    def check(self, gate: str, rows: list[dict], checks: list) -> list[dict]:
        """``rows`` through ``checks``: the kept ones back, the rejected ones (with their
        check and reason) into ``rejected``, the counts into gate ``gate``."""
        outcome = apply_checks(rows, checks)
        self.rejected += [self.rejected_row(r) for r in outcome.rejected]
        note = ", ".join(f"{k} {v}" for k, v in sorted(outcome.rejected_counts().items()))
        self.gate(gate, len(outcome.kept), len(outcome.rejected), note)
        return outcome.kept

    def rejected_row(self, r: dict) -> dict:
        t = self.target
        return {
            **r,
            "suite": f"mft-{t.split}-{'extended' if r.get('paraphrase_of') else 'original'}",
            "capability": r.get("source_topic"),
            "expected_label": r.get("label"),
            "source": f"{r.get('source_id')}: {self.reps.get(r.get('source_id'), '')}",
            "meta": {"version": t.version, "split": t.split, "paraphrase_of": r.get("paraphrase_of")},
        }

    def expected(self, r: dict) -> str:
        return self.m.label_words.get(r["label"], r["label"])

    def content_checks(self, prompt: str, with_original: bool) -> list:
        """The checks of ``engine/mft/checks.py`` for the answers of prompt ``prompt``."""
        instructions = prompt_instructions(prompt)

        def sources(r: dict) -> list[str]:
            return [self.reps.get(r["source_id"], "")] + ([r["paraphrase_of"]] if with_original else [])

        def prompt_text(r: dict) -> str:
            return instructions + " " + (self.example_texts.get(r["label"], "") if not with_original else "")

        return content_checks(
            prompt_text,
            sources,
            lambda r: self.reps.get(r["source_id"], ""),
            self.expected,
            self.m.near_copy_overlap,
            parse=self.parse,
        )

    def gate(self, name: str, kept: int, dropped: int, note: str = "") -> None:
        self.log.add(name, self.target.split, self.target.version, kept, dropped, note, seconds=self.lap())

    def params(self, base: GenerationParams) -> GenerationParams:
        """``base`` sampling with this version's seed."""
        return base.model_copy(update={"seed": self.target.seed})

    def examples(self, docs: Sequence[dict], labels: set[str]) -> dict[str, dict]:
        """One worked example per label (Figure 5)."""
        rng = np.random.default_rng(self.target.seed)
        constrained = "examples" in self.m.constrained
        examples = few_shot_examples(
            docs, self.chat, self.params(self.m.generation), rng, self.log, constrained=constrained
        )
        missing = sorted(labels - set(examples))
        self.gate(
            "few-shot examples", len(examples), len(missing), f"no parseable example for {missing}" if missing else ""
        )
        for label, ex in examples.items():  # what a case may not copy from the example shown
            self.example_texts[label] = " ".join([ex["doc"]["text"], *(f"{s} {r}" for s, r in ex["cases"])])
        return examples

    def generate(self, reps: Sequence[dict], examples: dict[str, dict]) -> list[dict]:
        """MFT cases from every representative whose label has an example (Figure 6)."""
        with self.chat.step("MFT generation", sum(r["label"] in examples for r in reps)):
            generated = generate_mfts(
                reps,
                examples,
                self.chat,
                self.params(self.m.generation),
                self.log,
                constrained="generate" in self.m.constrained,
            )
        self.gate("generated MFTs", len(generated), 0, f"from {len(reps)} representatives")
        self.reps.update({r["id"]: r["text"] for r in reps})
        kept = self.check("automatic checks", generated, self.content_checks("mft_generate", with_original=False))
        seen = set()
        for r in self.rejected:
            key = normalize_text(r["text"])
            if r["check"] == "near copy" and key not in seen:
                seen.add(key)
                self.copies.append({k: v for k, v in r.items() if k in generated[0] and k != "checks"})
        return kept

    def dedupe(self, generated: list[dict]) -> list[dict]:
        """Exact (normalized text), then near duplicates (cosine >= ``near_duplicate_cosine``)."""
        return self.check(
            "de-duplication",
            generated,
            [duplicate_check(self.seen), near_duplicate_check(self.embed, self.m.near_duplicate_cosine)],
        )

    def paraphrase(self, kept: list[dict]) -> list[dict]:
        """``paraphrases`` rephrasings of the first ``paraphrase_limit`` kept MFTs (§2.3),
        then of the near-copies (``copies``) while the limit allows."""
        m = self.m
        pool = kept + self.copies
        chosen = pool[: m.paraphrase_limit] if m.paraphrase_limit is not None else pool
        with self.chat.step("paraphrases", len(chosen) if m.paraphrases > 0 else 0):
            paraphrased = paraphrase_cases(
                chosen,
                m.paraphrases,
                self.chat,
                self.params(m.paraphrase_generation),
                self.log,
                constrained="paraphrase" in m.constrained,
            )
        self.gate("paraphrases", len(paraphrased), 0, f"{m.paraphrases} asked for each of {len(chosen)}")
        checks = [*self.content_checks("mft_paraphrase", with_original=True), duplicate_check(self.seen)]
        fresh = [{**r, "checks": []} for r in paraphrased]  # not the original's checks
        return self.check("automatic checks (paraphrases)", fresh, checks)

    def candidates(self, kept: list[dict], paraphrased: list[dict]) -> list[dict]:
        """Originals and paraphrases with their split, version, seed and expected answer word."""
        t = self.target
        originals = [{**r, "paraphrase_of": None} for r in kept]
        return [
            {**r, "split": t.split, "version": t.version, "seed": t.seed, "expected": self.m.label_words[r["label"]]}
            for r in originals + paraphrased
        ]

    def label_check(self, candidates: list[dict]) -> list[dict]:
        """The LLM's label check (§2.4.2), when ``label_check`` is on."""
        if not self.m.label_check:
            return candidates
        with self.chat.step("label check", len(candidates)):
            kept, counts = label_gate(
                candidates,
                self.chat,
                self.m.label_generation,
                self.log,
                constrained="label" in self.m.constrained,
                rejected=self.rejected,
            )
        self.rejected[:] = [self.rejected_row(r) if "suite" not in r else r for r in self.rejected]
        kept = [{**r, "checks": [*r.get("checks", []), "llm label"]} for r in kept]
        note = ", ".join(f"{k} {v}" for k, v in counts.items())
        self.gate("label check", len(kept), len(candidates) - len(kept), note)
        return kept


def generate_version(
    reps: Sequence[dict],
    docs: Sequence[dict],
    m: Any,
    chat: StageChat,
    embed: Callable[[list[str]], np.ndarray],
    target: VersionTarget,
    log: GateLog,
    rejected: list[dict] | None = None,
    parse: Callable[[str], Any] | None = None,
) -> list[dict]:
    """The cases of one split x version that passed every gate. ``reps`` are the split's
    representative documents, ``docs`` all its documents (few-shot examples come from them);
    the candidates a check rejected are appended to ``rejected``; ``parse`` (a spaCy
    pipeline) turns the pair-pronoun check on."""
    steps = VersionSteps(m, chat, embed, target, log, parse=parse)
    examples = steps.examples(docs, {r["label"] for r in reps})
    kept = steps.dedupe(steps.generate(reps, examples))
    paraphrased = steps.paraphrase(kept)
    cases = steps.label_check(steps.candidates(kept, paraphrased))
    if rejected is not None:
        rejected += steps.rejected
    return cases


def version_tables(cases: Sequence[dict], log: GateLog, rejected: Sequence[dict] = ()) -> dict[str, pa.Table]:
    """A generate stage's outputs: ``data`` (the kept cases), ``gates``, ``parsing`` and
    ``rejected`` (the candidates a check rejected, with the check and reason)."""
    return {
        "rejected": rejected_table(rejected),
        "data": pa.Table.from_pylist([{k: r.get(k) for k in CASE_ROW_SCHEMA.names} for r in cases], CASE_ROW_SCHEMA),
        "gates": pa.Table.from_pylist(log.rows, schema=GATE_SCHEMA),
        "parsing": pa.Table.from_pylist(
            [
                {"step": step, **{f: getattr(stats, f) for f in PARSE_COUNTS}, "examples": stats.examples}
                for step, stats in log.parse.items()
            ],
            schema=PARSING_SCHEMA,
        ),
    }


def collect_versions(parts: Sequence[Mapping[str, pa.Table]]) -> dict[str, pa.Table]:
    """Every split x version's ``version_tables`` in one table each (parse counts summed
    per step); a one-line error when no case survived anywhere."""
    data = pa.concat_tables([p["data"] for p in parts])
    if not data.num_rows:
        raise EmptySuiteError(
            "the mft job kept no test case: every generation was unparseable or dropped "
            "(see the gate counts in stages/generate-*/gates.parquet and the reasons in stages/generate-*/rejected.parquet)"
        )
    # the same text from two versions (or splits) tests one thing: the first one stays
    outcome = apply_checks(data.to_pylist(), [Check("duplicate across versions", duplicate_check().fn)])
    across = [rejected_case(r) for r in outcome.rejected]
    data = pa.Table.from_pylist([{k: r.get(k) for k in CASE_ROW_SCHEMA.names} for r in outcome.kept], CASE_ROW_SCHEMA)
    return {
        "rejected": pa.concat_tables([*(p["rejected"] for p in parts if "rejected" in p), rejected_table(across)]),
        "data": data,
        "gates": pa.concat_tables([p["gates"] for p in parts]),
        "parsing": merge_parsing(pa.concat_tables([p["parsing"] for p in parts])),
    }


def rejected_case(r: Mapping[str, Any]) -> dict[str, Any]:
    """A kept case row that a later check rejected, in ``rejected.parquet``'s terms (its
    suite, capability, expected label and source)."""
    return {
        **r,
        "suite": f"mft-{r['split']}-{'extended' if r.get('paraphrase_of') else 'original'}",
        "capability": r["source_topic"],
        "expected_label": r["label"],
        "source": r["source_id"],
        "meta": {"version": r["version"], "split": r["split"], "paraphrase_of": r["paraphrase_of"]},
    }


def merge_parsing(parsing: pa.Table) -> pa.Table:
    """Parse counts summed per step, with the first few unparsed answers of each."""
    merged: dict[str, dict] = {}
    for row in parsing.to_pylist():
        acc = merged.setdefault(row["step"], {"step": row["step"], **dict.fromkeys(PARSE_COUNTS, 0), "examples": []})
        for f in PARSE_COUNTS:
            acc[f] += row[f]
        acc["examples"] = (acc["examples"] + list(row["examples"] or []))[:PARSE_EXAMPLES]
    return pa.Table.from_pylist(list(merged.values()), schema=PARSING_SCHEMA)
