"""The ``--mapping`` YAML: what a CheckList test expects when its ``expect`` cannot be read.

    tests:
      "Sentiment change over time, present should prevail":   # exact test name
        type: DIR
        direction: up
        label: positive
        tolerance: 0.1
      "*neutral*":                                             # fnmatch glob
        labels: [neutral]
      "add positive phrases":                                  # CheckList's diff_up
        type: DIR
        direction: up
        label: positive
        versus: negative                                       # P(positive) - P(negative)
        tolerance: 0.1
      "intensifiers":                                          # slice_pairwise(pred != neutral)
        original_labels: [negative, positive]
      "Q & A: no":                                             # label 1: pred != 0
        label_sets: {neutral: [neutral, positive]}
      "Typos":
        skip: true
        reason: the model is expected to change here
      "Change name everywhere":                                # --task qa: SQuAD's expect_same
        answer_renamed: true

An exact name beats a glob; among globs the first in the file wins. An entry's fields
override the recognised (or default) expectation field by field. Labels here are label
NAMES, as the model reports them (``--labels`` does not apply to them).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError, model_validator

from checkray.engine.errors import InputError
from checkray.engine.strict import StrictInput, load_yaml

_GLOB_CHARS = set("*?[")


class TestMapping(StrictInput):
    """What one test (or every test a glob matches) expects."""

    model_config = ConfigDict(extra="forbid")
    __test__ = False  # not a pytest test class

    type: Literal["MFT", "INV", "DIR"] | None = None
    labels: list[str] | None = Field(None, min_length=1)  # MFT: any of these labels passes
    label: str | None = None  # MFT: the one label; DIR: the label whose probability moves
    direction: Literal["up", "down", "becomes"] | None = None  # DIR ("becomes": predicted label)
    tolerance: float | None = Field(None, ge=0.0, le=1.0)  # INV / DIR
    # DIR: the score is P(label) - P(versus) (CheckList's sentiment positive_change)
    versus: str | None = None
    # INV / DIR: judge a test case only when the original's prediction is one of these
    original_labels: list[str] | None = Field(None, min_length=1)
    # MFT: a row whose own label is the key passes with any label of the value
    label_sets: dict[str, list[str]] | None = Field(None, min_length=1)
    skip: bool = False
    reason: str | None = None  # why a test is skipped: said in the import report
    # INV of answers (--task qa): the perturbation renamed something in the context and the
    # question, so the answer must be the original's renamed (CheckList SQuAD's expect_same)
    answer_renamed: bool | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TestMapping:
        if self.labels is not None and self.label is not None:
            raise ValueError("give 'label' or 'labels', not both")
        if self.label_sets is not None and (self.labels is not None or self.label is not None):
            raise ValueError("give 'label_sets' or 'label'/'labels', not both")
        if self.label_sets is not None and not all(self.label_sets.values()):
            raise ValueError("each 'label_sets' entry names at least one label")
        if self.reason is not None and not self.skip:
            raise ValueError("'reason' explains a 'skip: true'")
        if self.type is not None:
            check_fields(self, self.type)
        return self


def check_fields(entry: TestMapping, test_type: str) -> None:
    """ValueError when ``entry`` sets a field that means nothing for ``test_type``."""
    allowed = {
        "MFT": {"labels", "label", "label_sets"},
        "INV": {"tolerance", "original_labels", "answer_renamed"},
        "DIR": {"label", "direction", "tolerance", "versus", "original_labels"},
    }
    fields = ("labels", "label", "label_sets", "direction", "tolerance", "versus", "original_labels", "answer_renamed")
    given = {f for f in fields if getattr(entry, f) is not None}
    wrong = sorted(given - allowed[test_type])
    if wrong:
        raise ValueError(f"{', '.join(repr(w) for w in wrong)} does not apply to a {test_type} test")


class MappingFile(StrictInput):
    model_config = ConfigDict(extra="forbid")

    tests: dict[str, TestMapping] = Field(default_factory=dict)


class Mapping:
    """A loaded mapping file: ``lookup(name)`` finds the entry for a test."""

    def __init__(self, path: str, spec: MappingFile):
        self.path = path
        self.spec = spec
        self.used: set[str] = set()

    def lookup(self, test_name: str) -> tuple[str, str, TestMapping] | None:
        """(key, "exact" or "glob", entry) for ``test_name``, or None."""
        entry = self.spec.tests.get(test_name)
        if entry is not None:
            self.used.add(test_name)
            return test_name, "exact", entry
        for key, entry in self.spec.tests.items():
            if _GLOB_CHARS & set(key) and fnmatchcase(test_name, key):
                self.used.add(key)
                return key, "glob", entry
        return None

    def unused(self) -> list[str]:
        return [key for key in self.spec.tests if key not in self.used]

    def error(self, key: str, message: str) -> InputError:
        return InputError(f"{self.path}: tests.'{key}': {message}")


def load_mapping(path: str | Path) -> Mapping:
    """Read and validate a mapping file; one-line errors naming the file and the field."""
    path = str(path)
    try:
        raw = load_yaml(Path(path).read_text(encoding="utf-8"))  # duplicate keys refused
    except FileNotFoundError:
        raise InputError(f"{path}: mapping file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the mapping file: {exc}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise InputError(f"{path}: not valid YAML{line}: {problem}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InputError(f"{path}: a mapping file is a YAML mapping with a 'tests' key")
    try:
        spec = MappingFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(
            f"'{p}'" if isinstance(p, str) and (" " in p or _GLOB_CHARS & set(p)) else str(p) for p in err["loc"]
        )
        message = err["msg"].removeprefix("Value error, ")
        raise InputError(f"{path}: {loc or 'file'}: {message}") from None
    return Mapping(path, spec)
