"""CI gates on pass rates (pure): the gate file, its rules, and their verdicts.

A gate file is YAML, read strictly (duplicate keys, unknown fields, booleans for numbers
and inf/NaN are one-line errors)::

    baseline: runs/release-1.4/bench   # optional: a benchmark run for max_drop rules of
    baseline_model: tfidf_lr            #   `checkray benchmark --gate` (compare uses its --baseline)
    rules:
      - name: vocabulary
        capability: Vocabulary            # globs: "Neg*", lists: [Negation, "Temporal*"]
        min_pass_rate: 0.9
      - test_type: MFT
        min_pass_rate: 0.8
        each: capability                  # one check per capability the rule matches
      - test: "*negated*"                 # a test's name (the suite's topic column)
        max_drop: 0.02                    # at most 2 points below the baseline, on the same cases
        alpha: 0.05                       # ... counted only when McNemar's p < alpha

Selectors (``suite``, ``capability``, ``test``, ``test_type``, ``model``) are glob patterns
(``fnmatch``, case-sensitive) or lists of them; a rule matches the cases every given
selector matches. Every rule is checked for every model it matches (for ``compare``: the
candidate). A pass rate is passed cases / judged cases (CheckList's verdicts, the
benchmark's ``pass`` column). A rule that matches no judged case fails: a renamed
capability must not turn a gate green.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import ConfigDict, Field, ValidationError, model_validator

from checkray.engine.compare.stats import mcnemar_exact
from checkray.engine.config import format_error
from checkray.engine.errors import ConfigError, InputError
from checkray.engine.strict import StrictInput, load_yaml

SELECTORS = {"suite": "suite", "capability": "capability", "test": "topic", "test_type": "test_type"}
Patterns = str | list[str] | None


class GateRule(StrictInput):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    suite: Patterns = None
    capability: Patterns = None
    test: Patterns = None  # the test's name (``topic`` column)
    test_type: Patterns = None
    model: Patterns = None
    min_pass_rate: float | None = Field(default=None, ge=0, le=1)
    max_drop: float | None = Field(default=None, ge=0, le=1)  # baseline rate - candidate rate, same cases
    alpha: float | None = Field(default=None, gt=0, lt=1)  # max_drop fails only when McNemar's p < alpha
    each: Literal["suite", "capability", "test", "test_type"] | None = None

    @model_validator(mode="after")
    def _has_threshold(self) -> GateRule:
        if self.min_pass_rate is None and self.max_drop is None:
            raise ValueError("a rule needs min_pass_rate, max_drop or both")
        if self.alpha is not None and self.max_drop is None:
            raise ValueError("alpha applies to max_drop; set max_drop too")
        return self

    def label(self) -> str:
        if self.name:
            return self.name
        parts = []
        for sel in ("suite", "capability", "test", "test_type", "model"):
            value = getattr(self, sel)
            if value is not None:
                parts.append(f"{sel}={','.join(value) if isinstance(value, list) else value}")
        what = " ".join(parts) or "all"
        limits = []
        if self.min_pass_rate is not None:
            limits.append(f"min_pass_rate {self.min_pass_rate:g}")
        if self.max_drop is not None:
            limits.append(f"max_drop {self.max_drop:g}")
        return f"{what}: {', '.join(limits)}"


class GateFile(StrictInput):
    model_config = ConfigDict(extra="forbid")

    baseline: str | None = None  # a benchmark run directory (for `benchmark --gate` max_drop rules)
    baseline_model: str | None = None  # its model to compare with (default: same name, else its only model)
    rules: list[GateRule] = Field(min_length=1)

    @property
    def needs_baseline(self) -> bool:
        return any(r.max_drop is not None for r in self.rules)


def read_gate(path: str | Path) -> GateFile:
    """A gate file, strictly; one-line errors name the file and the field."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: gate file not found")
    try:
        data = load_yaml(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError(f"{p}: gate file is not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{p}: bad YAML{at}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a gate file is a mapping with 'rules: [...]'")
    try:
        gate = GateFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{p}: {format_error(exc)}") from None
    if gate.baseline and not Path(gate.baseline).is_absolute() and "://" not in gate.baseline:
        gate = gate.model_copy(update={"baseline": str((p.parent / gate.baseline).resolve())})
    return gate


def _matches(values: pd.Series, patterns: Patterns) -> np.ndarray:
    if patterns is None:
        return np.ones(len(values), dtype=bool)
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    text = values.astype(object).where(values.notna(), "").astype(str)
    return np.array([any(fnmatch.fnmatchcase(v, p) for p in pats) for v in text], dtype=bool)


def _literal(value: str) -> str:
    """A glob that matches exactly ``value``."""
    return re.sub(r"([*?\[])", r"[\1]", value)


def select(frame: pd.DataFrame, rule: GateRule) -> pd.DataFrame:
    """Rows of ``frame`` (KEYS columns; ``topic`` is the test name) the rule's selectors match."""
    mask = np.ones(len(frame), dtype=bool)
    for sel, column in SELECTORS.items():
        mask &= _matches(frame[column], getattr(rule, sel))
    return frame[mask]


@dataclass
class Check:
    """One rule checked for one model (and one group when the rule says ``each``)."""

    rule: str
    model: str
    group: str | None
    passed: bool
    n: int
    pass_rate: float | None
    min_pass_rate: float | None = None
    max_drop: float | None = None
    alpha: float | None = None
    n_paired: int | None = None
    baseline_pass_rate: float | None = None  # on the paired cases
    candidate_paired_rate: float | None = None
    drop: float | None = None
    pass_to_fail: int | None = None
    fail_to_pass: int | None = None
    p_value: float | None = None
    reasons: list[str] = field(default_factory=list)
    examples: list[dict] = field(default_factory=list)

    @property
    def name(self) -> str:
        where = f" [{self.group}]" if self.group else ""
        return f"{self.rule}{where}"

    def measured(self) -> str:
        rate = "n/a" if self.pass_rate is None else f"{self.pass_rate:.3f}"
        out = f"pass rate {rate} (n={self.n})"
        if self.drop is not None:
            out += (
                f", drop {self.drop:+.3f} vs baseline {self.baseline_pass_rate:.3f} on {self.n_paired} paired cases"
                f" ({self.pass_to_fail} pass->fail, {self.fail_to_pass} fail->pass, McNemar p={self.p_value:.4g})"
            )
        return out

    def line(self) -> str:
        status = "ok  " if self.passed else "FAIL"
        why = "; ".join(self.reasons) if self.reasons else self.measured()
        return f"{status} {self.model}: {self.name}: {why}"


def _examples(examples: pd.DataFrame | None, model: str, rule: GateRule, per_check: int) -> list[dict]:
    if examples is None or examples.empty or per_check <= 0:
        return []
    mine = select(examples[examples["model"] == model], rule)
    cols = [c for c in ("suite", "capability", "topic", "test_type", "text", "expected", "predicted") if c in mine]
    shown = mine[cols].head(per_check).astype(object)
    return shown.where(shown.notna(), None).to_dict("records")  # a missing topic is None, not NaN


def _check(
    rule: GateRule,
    model: str,
    group: str | None,
    cells: pd.DataFrame,
    paired: pd.DataFrame | None,
    examples: list[dict],
) -> Check:
    n = int(cells["n"].sum())
    passes = int(cells["passes"].sum())
    rate = passes / n if n else None
    check = Check(rule.label(), model, group, True, n, rate, rule.min_pass_rate, rule.max_drop, rule.alpha)
    if n == 0:
        check.passed = False
        check.reasons.append("the rule matched no judged case")
        return check
    if rule.min_pass_rate is not None and rate is not None and rate < rule.min_pass_rate - 1e-12:
        check.passed = False
        check.reasons.append(f"pass rate {rate:.3f} < min {rule.min_pass_rate:g} (n={n}, {n - passes} failed)")
    if rule.max_drop is not None:
        if paired is None:
            check.passed = False
            check.reasons.append("max_drop needs a baseline (compare --baseline, or 'baseline:' in the gate file)")
        else:
            base = paired["base_pass"].to_numpy(dtype=bool)
            cand = paired["cand_pass"].to_numpy(dtype=bool)
            check.n_paired = len(paired)
            if len(paired) == 0:
                check.passed = False
                check.reasons.append("no case of the rule was judged for both the baseline and this model")
            else:
                check.baseline_pass_rate = float(base.mean())
                check.candidate_paired_rate = float(cand.mean())
                check.drop = check.baseline_pass_rate - check.candidate_paired_rate
                check.pass_to_fail = int(np.sum(base & ~cand))
                check.fail_to_pass = int(np.sum(~base & cand))
                check.p_value = mcnemar_exact(check.pass_to_fail, check.fail_to_pass)
                significant = rule.alpha is None or check.p_value < rule.alpha
                if check.drop > rule.max_drop + 1e-12 and significant:
                    check.passed = False
                    sig = f", McNemar p={check.p_value:.4g}" + (f" < {rule.alpha:g}" if rule.alpha else "")
                    check.reasons.append(
                        f"drop {check.drop:.3f} > max {rule.max_drop:g} vs baseline "
                        f"({check.baseline_pass_rate:.3f} -> {check.candidate_paired_rate:.3f} on "
                        f"{len(paired)} paired cases, {check.pass_to_fail} pass->fail{sig})"
                    )
    if not check.passed:
        check.examples = examples
    return check


GROUP_COLUMN = {"suite": "suite", "capability": "capability", "test": "topic", "test_type": "test_type"}


def evaluate_gate(
    gate: GateFile,
    cells: pd.DataFrame,
    paired: Mapping[str, pd.DataFrame] | None = None,
    examples: pd.DataFrame | None = None,
    models: Sequence[str] | None = None,
    examples_per_check: int = 3,
) -> list[Check]:
    """Check every rule for every model.

    ``cells``: one row per model x suite x capability x topic x test_type with ``n`` (judged
    cases) and ``passes``. ``paired``: per model, its cases paired with the baseline's
    (``checkray.engine.compare.pairing``), for ``max_drop``. ``examples``: failing cases (model,
    KEYS, text, expected, predicted) shown with failed checks."""
    checks: list[Check] = []
    names = list(models) if models is not None else sorted(set(cells["model"]))
    for rule in gate.rules:
        for model in names:
            if not _matches(pd.Series([model]), rule.model)[0]:
                continue
            mine = select(cells[cells["model"] == model], rule)
            pairs = None if paired is None or model not in paired else select(paired[model], rule)
            if rule.each is None:
                checks.append(
                    _check(rule, model, None, mine, pairs, _examples(examples, model, rule, examples_per_check))
                )
                continue
            column = GROUP_COLUMN[rule.each]
            values = sorted(set(mine[column].astype(object).where(mine[column].notna(), "")))
            if not values:
                checks.append(_check(rule, model, None, mine, pairs, []))
            for value in values:
                sub = rule.model_copy(update={rule.each: _literal(value)})
                cell = mine[mine[column].astype(object).where(mine[column].notna(), "") == value]
                pair_cell = None
                if pairs is not None:
                    pair_cell = pairs[pairs[column].astype(object).where(pairs[column].notna(), "") == value]
                shown = _examples(examples, model, sub, examples_per_check)
                checks.append(_check(rule, model, f"{rule.each}={value}", cell, pair_cell, shown))
    return checks


def cells_from_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Gate cells from a benchmark ``summary.parquet`` (``n`` judged, ``failures``)."""
    out = summary[["model", "suite", "capability", "topic", "test_type", "n"]].copy()
    out["passes"] = summary["n"] - summary["failures"]
    return out
