"""TestAug's validity filter (§4.2) decided case by case: who judges a generated case,
the two phases, and the per-description decision table.

Three judges, each passed in: people's annotations (``people_verdicts``), a validity
classifier (anything with ``predict_proba``, ``covers`` ...: the ``Classifier`` protocol;
``actors/testaug/validity.py`` holds the trained ones) and the LLM labeler (a ``Labeler``
callable, e.g. ``llm_label`` over a chat). Validity is relative to a description: a
classifier judges only the descriptions its annotations were for, people's verdicts are
matched by description and text.

Phase 1 (``judge_cases``): each description's first sample is annotated by people when
they covered it, else by the LLM labeler, else by the classifier; a description whose
valid share reaches the threshold is kept unfiltered. Phase 2: below the threshold each
case is decided by people, else the classifier, else the LLM labeler (``decide_case``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

import pyarrow as pa

from checkray.engine.testaug.prompt import Description, normalize
from checkray.engine.testaug.validity import PhaseDecision, case_text, classifier_input, phase_decision

VALIDITY_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("prompt", pa.int64()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("seeds", pa.string()),
        ("first_sample", pa.bool_()),
        ("valid_people", pa.int64()),
        ("valid_llm", pa.int64()),
        ("valid_p", pa.float64()),
        ("valid_clf", pa.int64()),
        ("kept", pa.bool_()),
        ("decided_by", pa.string()),
        ("checks", pa.list_(pa.string())),  # the automatic checks it passed (engine/testaug/checks.py)
    ]
)


@dataclass
class GeneratedCase:
    """One parsed generated case of a description and what the judges said about it
    (a row of the validity and topup stages' tables, ``VALIDITY_SCHEMA``)."""

    key: str  # the description's key (d01 ...)
    prompt: int  # the generation prompt it came from (round index)
    text: str
    text_pair: str | None
    seeds: str  # the seeds its prompt showed: a JSON list of ``seed_entry`` strings
    first_sample: bool = False  # in its description's phase-1 sample
    valid_people: int | None = None  # people's verdict (1 valid, 0 invalid)
    valid_llm: int | None = None  # the LLM labeler's verdict
    valid_p: float | None = None  # the classifier's P(valid)
    valid_clf: int | None = None  # the classifier's verdict at its threshold
    kept: bool | None = None
    decided_by: str | None = None
    checks: list[str] | None = None  # the automatic checks it passed before the judges

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> GeneratedCase:
        """From a parse-stage row (no verdicts yet) or a validity-stage row."""
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})


def read_cases(table: pa.Table) -> list[GeneratedCase]:
    return [GeneratedCase.from_row(r) for r in table.to_pylist()]


def cases_table(cases: Iterable[GeneratedCase]) -> pa.Table:
    return pa.Table.from_pylist([asdict(c) for c in cases], schema=VALIDITY_SCHEMA)


class Classifier(Protocol):
    """What the filter asks of a validity classifier (``ValidityClassifier`` in actors)."""

    threshold: float

    @property
    def reads_description(self) -> bool: ...

    def covers(self, description: str) -> bool: ...

    def predict_proba(self, texts: Sequence[str]) -> Sequence[float]: ...


# The LLM labeler: label requests (``description``, ``text``, ``text_pair``, ``examples``)
# -> a verdict per request (None: its answer named none).
Labeler = Callable[[list[dict[str, Any]]], list[bool | None]]

PeopleVerdicts = Mapping[tuple[str, str, str], int]  # (description, text, pair), normalized -> 0/1


def people_verdicts(rows: Iterable[Mapping[str, Any]], descs: Sequence[Description]) -> dict[tuple[str, str, str], int]:
    """People's verdicts by (description, text, pair), normalized: a sentence can be valid
    for one description and not another. Rows that name no description of this spec (or
    none at all) hold for any description ("" in the key)."""
    ours = {normalize(d.description) for d in descs}
    verdicts: dict[tuple[str, str, str], int] = {}
    for r in rows:
        described = normalize(str(r["description"] or ""))
        key = (described if described in ours else "", normalize(r["text"]), normalize(r["text_pair"] or ""))
        verdicts[key] = r["validity"]
    return verdicts


class CaseJudges:
    """Who can judge a generated case of each description: people's annotations (matched
    by text), the validity classifier (only for the descriptions it was trained on:
    validity is relative to a description) and the LLM labeler (None: disabled), shown
    ``labeler_examples`` seed cases of the description as valid examples."""

    def __init__(
        self,
        descs: Sequence[Description],
        *,
        people: PeopleVerdicts | None = None,
        classifier: Classifier | None = None,
        labeler: Labeler | None = None,
        labeler_examples: int = 0,
    ):
        self.desc_of = {d.key: d for d in descs}
        self.people = dict(people or {})
        self.classifier = classifier
        self.labeler = labeler
        self.labeler_examples = labeler_examples
        self.judged = {d.key for d in descs if classifier is not None and classifier.covers(d.description)}

    @property
    def classifier_unused(self) -> bool:
        """A classifier was given but covers none of the descriptions."""
        return self.classifier is not None and not self.judged

    def annotate(self, cases: Sequence[GeneratedCase]) -> None:
        """Set each case's people's verdict, and the classifier's probability and verdict
        (covered descriptions); the LLM labeler's verdict is reset (``ask_llm`` sets it)."""
        prob_of = self._classifier_probabilities(cases)
        for i, c in enumerate(cases):
            d = self.desc_of[c.key]
            case = (normalize(c.text), normalize(c.text_pair or ""))
            c.valid_people = self.people.get((normalize(d.description), *case), self.people.get(("", *case)))
            c.valid_p = prob_of.get(i)
            c.valid_clf = None if c.valid_p is None else int(c.valid_p >= self.classifier.threshold)
            c.valid_llm = None

    def _classifier_probabilities(self, cases: Sequence[GeneratedCase]) -> dict[int, float]:
        """P(valid) by case index, for the cases of the descriptions the classifier covers."""
        to_judge = [i for i, c in enumerate(cases) if c.key in self.judged]
        if not to_judge:
            return {}
        reads = self.classifier.reads_description
        inputs = [
            classifier_input(
                cases[i].text, cases[i].text_pair, self.desc_of[cases[i].key].description if reads else None
            )
            for i in to_judge
        ]
        return dict(zip(to_judge, (float(p) for p in self.classifier.predict_proba(inputs))))

    def label_request(self, c: GeneratedCase) -> dict[str, Any]:
        """What the LLM labeler is shown of a case."""
        d = self.desc_of[c.key]
        examples = [case_text(e.text, e.text_pair) for e in d.seeds[: self.labeler_examples]]
        return {"description": d.description, "text": c.text, "text_pair": c.text_pair, "examples": examples}

    def ask_llm(self, cases: Sequence[GeneratedCase]) -> None:
        """The LLM labeler's verdicts on ``cases`` (``valid_llm``), if it is enabled."""
        if self.labeler is None or not cases:
            return
        verdicts = self.labeler([self.label_request(c) for c in cases])
        for c, verdict in zip(cases, verdicts):
            c.valid_llm = None if verdict is None else int(bool(verdict))

    def needs_llm(self, c: GeneratedCase) -> bool:
        """Phase 2: the labeler judges what neither people nor the classifier did."""
        return c.key not in self.judged and c.valid_people is None and c.valid_llm is None

    def phase1_source(self, key: str, first: Sequence[GeneratedCase]) -> str:
        """Who annotates a description's first sample: people > LLM labeler > classifier."""
        if any(c.valid_people is not None for c in first):
            return "people"
        if self.labeler is not None:
            return "llm"
        return "classifier" if key in self.judged else "none"


def decide_case(c: GeneratedCase, *, needs_filter: bool) -> None:
    """Keep or drop a case: unfiltered descriptions keep everything; filtered ones take
    people's verdict, else the classifier's, else the LLM labeler's."""
    if not needs_filter:
        c.kept, c.decided_by = True, "no filter (phase 1)"
    elif c.valid_people is not None:
        c.kept, c.decided_by = bool(c.valid_people), "people"
    elif c.valid_clf is not None:
        c.kept, c.decided_by = bool(c.valid_clf), "classifier"
    elif c.valid_llm is not None:
        c.kept, c.decided_by = bool(c.valid_llm), "llm labeler"
    else:
        c.kept, c.decided_by = True, "unfiltered (no classifier or labeler)"


def mark_first_samples(cases: Sequence[GeneratedCase], first_sample: int) -> None:
    """The first ``first_sample`` cases of each description form its phase-1 sample."""
    seen: dict[str, int] = {}
    for c in cases:
        c.first_sample = seen.get(c.key, 0) < first_sample
        seen[c.key] = seen.get(c.key, 0) + 1


def _phase1_flags(source: str, first: Sequence[GeneratedCase]) -> list[bool | int | None]:
    """The first sample's verdicts by the judge that annotated it."""
    if source == "people":
        return [c.valid_people for c in first]
    if source == "llm":
        return [c.valid_llm for c in first]
    if source == "classifier":
        return [bool(c.valid_clf) for c in first]
    return []


def phase1(
    cases: Sequence[GeneratedCase], descs: Sequence[Description], judges: CaseJudges, threshold: float
) -> dict[str, PhaseDecision]:
    """Each description's phase-1 decision from its first sample (the LLM labeler asked
    once, over every description it annotates)."""
    first_of = {d.key: [c for c in cases if c.key == d.key and c.first_sample] for d in descs}
    sources = {d.key: judges.phase1_source(d.key, first_of[d.key]) for d in descs}
    judges.ask_llm([c for c in cases if c.first_sample and sources[c.key] == "llm"])
    return {
        d.key: phase_decision(_phase1_flags(sources[d.key], first_of[d.key]), threshold, sources[d.key]) for d in descs
    }


def judge_cases(
    cases: Sequence[GeneratedCase],
    descs: Sequence[Description],
    judges: CaseJudges,
    *,
    first_sample: int,
    threshold: float,
) -> dict[str, PhaseDecision]:
    """The two phases over a description's generated cases: every case ends ``kept`` or
    not, with who ``decided_by``; returns each description's phase-1 decision."""
    judges.annotate(cases)
    mark_first_samples(cases, first_sample)
    decisions = phase1(cases, descs, judges, threshold)
    filtered = [c for c in cases if decisions[c.key].needs_filter]
    judges.ask_llm([c for c in filtered if judges.needs_llm(c)])
    for c in cases:
        decide_case(c, needs_filter=decisions[c.key].needs_filter)
    return decisions


def judge_new_cases(cases: Sequence[GeneratedCase], judges: CaseJudges, needs_filter: Mapping[str, bool]) -> None:
    """Cases generated after phase 1 (the top-up): judged as phase 2 judges, or kept
    where phase 1 left their description unfiltered."""
    judges.annotate(cases)
    judges.ask_llm([c for c in cases if needs_filter[c.key] and judges.needs_llm(c)])
    for c in cases:
        c.first_sample = False
        decide_case(c, needs_filter=needs_filter[c.key])


def _share(pairs: list[tuple[int, int]]) -> float | None:
    return sum(a == b for a, b in pairs) / len(pairs) if pairs else None


def decision_rows(
    cases: Sequence[GeneratedCase],
    descs: Sequence[Description],
    decisions: Mapping[str, PhaseDecision],
    judged: set[str],
) -> list[dict[str, Any]]:
    """The validity filter's table, one row per description (``validity_decisions.parquet``):
    phase 1's sample, annotator, valid share and threshold, whether it filtered, what it
    kept and dropped, and how the classifier agreed with people and with the LLM labeler."""
    rows = []
    for d in descs:
        mine = [c for c in cases if c.key == d.key]
        dec = decisions[d.key]
        rows.append(
            {
                "key": d.key,
                "generated": len(mine),
                "first_sample": dec.n,
                "classifier": d.key in judged,
                "annotated_by": dec.source,
                "valid_share": dec.valid_share,
                "threshold": dec.threshold,
                "filter": dec.needs_filter,
                "kept": sum(bool(c.kept) for c in mine),
                "dropped": sum(not c.kept for c in mine),
                "classifier_accuracy": _share(
                    [
                        (c.valid_clf, c.valid_people)
                        for c in mine
                        if c.valid_people is not None and c.valid_clf is not None
                    ]
                ),
                "classifier_vs_llm": _share(
                    [(c.valid_clf, c.valid_llm) for c in mine if c.valid_llm is not None and c.valid_clf is not None]
                ),
            }
        )
    return rows


def add_topup(
    decisions: Sequence[Mapping[str, Any]], added: Sequence[GeneratedCase], prompts: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The decision rows with the top-up's prompts and cases counted in."""
    rows = []
    for r in decisions:
        mine = [c for c in added if c.key == r["key"]]
        rows.append(
            {
                **r,
                "topup_prompts": prompts.get(r["key"], 0),
                "topup_cases": len(mine),
                "generated": r["generated"] + len(mine),
                "kept": r["kept"] + sum(bool(c.kept) for c in mine),
                "dropped": r["dropped"] + sum(not c.kept for c in mine),
            }
        )
    return rows
