"""Question answering verdicts, as CheckList scores its SQuAD suite (pure; no model here).

A QA case is a test-case row with ``text`` = the context, ``text_pair`` = the question and
``expected_label`` (or any of ``expected_labels``) = the answer. CheckList's SQuAD suite
compares answer strings: its MFTs ``pred == label``; its INVs ``Expect.inv`` on
predictions whose confidences are not a softmax, which passes only when the answer is the
original's. So, for a model's answer per row:

* MFT: the answer equals the expected one (or one of ``expected_labels``), both read as
  the SQuAD notebook's ``clean`` reads them (``checklist_clean``);
* INV: the answer equals the answer on the case named in ``perturbs``; the original (no
  ``perturbs``) has no verdict of its own (``all_except_first``). With relation
  ``renamed`` (CheckList's ``expect_same``: a name or place changed in the context and the
  question) the answer must be the original's with that renaming applied, read from the
  row's CheckList meta ``[old, new]``;
* DIR: not defined for answers (an error per case).

``normalize=True`` compares SQuAD-normalised answers (lower case, no punctuation, no
articles, single spaces) instead.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's answer normalisation."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def checklist_clean(text: str) -> str:
    """The SQuAD notebook's ``clean``: ``text.lstrip('[a,the,an,in,at] ').rstrip('.')``.
    ``lstrip`` takes a set of characters, not words, so it also eats the leading letters of
    "nurse" or "ethan"; applied to both sides, as there, the verdicts stay CheckList's."""
    return text.lstrip("[a,the,an,in,at] ").rstrip(".")  # noqa: B005 (CheckList's own, quirk and all)


def renaming(meta_json: str | None) -> tuple[str, str] | None:
    """The ``[old, new]`` CheckList stored with a renamed perturbation, if the row has one."""
    item = json.loads(meta_json).get("checklist_meta") if meta_json else None
    if isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return item[0], item[1]
    return None


def renamed(answer: str, rename: tuple[str, str] | None) -> str:
    """``answer`` with the whole-word renaming applied (``expect_same``'s ``re.sub``)."""
    if rename is None:
        return answer
    old, new = rename
    return re.sub(rf"\b{re.escape(old)}\b", lambda _: new, answer)


def checked_answers(answers, n: int) -> list[str | None]:
    """A model's answers as a list of n strings (or None), or ValueError saying what is wrong."""
    if isinstance(answers, np.ndarray):
        answers = answers.tolist()
    if isinstance(answers, str) or not isinstance(answers, Sequence):
        raise ValueError(f"answer() returned {type(answers).__name__}, expected a list of {n} strings")
    if len(answers) != n:
        raise ValueError(f"answer() returned {len(answers)} answers for {n} questions")
    bad = next((a for a in answers if a is not None and not isinstance(a, str)), None)
    if bad is not None:
        raise ValueError(f"answer() returned a {type(bad).__name__} where a string belongs")
    return list(answers)


def judge_answers(
    cases: pa.Table, answers: Sequence[str | None], *, normalize: bool = False
) -> tuple[np.ndarray, list[str | None]]:
    """(passed, error) per row: True/False, or None (an INV original, no answer, an error)."""
    n = cases.num_rows
    if len(answers) != n:
        raise ValueError(f"{len(answers)} answers for {n} cases")

    def key(text: str | None) -> str | None:
        if text is None:
            return None
        return normalize_answer(text) if normalize else checklist_clean(text.strip())

    def same(a: str, b: str) -> bool:  # an INV compares answers as given (Expect.inv, expect_same)
        return normalize_answer(a) == normalize_answer(b) if normalize else a == b

    got = [None if a is None else a.strip() for a in answers]
    ids = {cid: i for i, cid in enumerate(cases.column("case_id").to_pylist())}
    types = cases.column("test_type").to_pylist()
    expected = cases.column("expected_label").to_pylist()
    label_sets = cases.column("expected_labels").to_pylist()
    perturbs = cases.column("perturbs").to_pylist()
    relations = cases.column("relation").to_pylist()
    metas = cases.column("meta").to_pylist()
    passed = np.full(n, None, dtype=object)
    errors: list[str | None] = [None] * n
    for i in range(n):
        if got[i] is None:
            errors[i] = "the model gave no answer"
            continue
        if types[i] == "MFT":
            wanted = {key(x) for x in (label_sets[i] or ([expected[i]] if expected[i] is not None else []))}
            if not wanted:
                errors[i] = "QA case has no expected answer"
            else:
                passed[i] = key(got[i]) in wanted
        elif types[i] == "INV":
            if perturbs[i] is None:
                continue  # the original: answered, not judged
            ref = ids.get(perturbs[i])
            if ref is None or got[ref] is None:
                errors[i] = f"perturbed case '{perturbs[i]}' has no answer"
            else:
                wanted = renamed(got[ref], renaming(metas[i])) if relations[i] == "renamed" else got[ref]
                passed[i] = same(got[i], wanted)
        else:
            errors[i] = f"a {types[i]} test is not defined for answers"
    return passed, errors
