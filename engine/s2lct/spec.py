"""S²LCT linguistic-capability specifications as data (Table 1 of the paper).

One YAML file per capability (``configs/s2lct/*.yaml``): search rules over a labeled
corpus (length bound, word classes to include/exclude by part of speech x polarity,
start patterns, required label) and transformation templates with their expected label.
Users add capabilities by listing more files or folders in ``s2lct.capabilities``.

A capability without transforms (LC1, LC2) turns every sentence its rules find into a
seed labeled with the rule's label; otherwise each transform builds seeds from its parts:
literal choices (``choose``) and sentences found by named rules (``sentence``), the
latter optionally negated (``negate``: word -> replacements, on the first match).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from checkray.engine.config import Section, format_error, read_yaml
from checkray.engine.errors import ConfigError

Polarity = Literal["positive", "negative", "neutral"]
BUILTIN_DIR = Path(__file__).resolve().parents[2] / "configs" / "s2lct"


class WordClass(Section):
    """Words whose coarse spaCy POS is in ``pos`` and whose lexicon polarity is ``polarity``."""

    pos: list[str] = Field(min_length=1)  # spaCy UPOS: ADJ, NOUN, VERB, ADV ...
    polarity: Polarity


class SearchRule(Section):
    name: str
    label: str | None = None  # required corpus label; None: any
    max_tokens: int | None = Field(default=None, ge=1)  # words, punctuation not counted
    min_tokens: int = Field(default=1, ge=1)
    include: list[WordClass] = Field(default_factory=list)  # each class must occur
    exclude: list[WordClass] = Field(default_factory=list)  # no class may occur
    start: list[list[str]] = Field(default_factory=list)  # alternatives per leading position
    exclude_words: list[str] = Field(default_factory=list)  # lowercased surface forms


class Part(Section):
    choose: list[str] | None = None  # literal alternatives (one drawn per seed)
    sentence: list[str] | None = None  # names of search rules (one drawn per seed)
    negate: dict[str, list[str]] | None = None  # on a sentence part: word -> replacements

    @model_validator(mode="after")
    def _one_kind(self) -> Part:
        if (self.choose is None) == (self.sentence is None):
            raise ValueError("a part has exactly one of 'choose' or 'sentence'")
        if self.negate is not None and self.sentence is None:
            raise ValueError("'negate' applies to a 'sentence' part only")
        for name, values in (("choose", self.choose), ("sentence", self.sentence)):
            if values is not None and not values:
                raise ValueError(f"'{name}' is empty")
        return self


class Transform(Section):
    label: str  # expected label of the seeds it makes
    accepts: list[str] = Field(default_factory=list)  # labels the capability also accepts (meta only)
    parts: list[Part] = Field(min_length=1)


class FluentWrapper(Section):
    """A fluent wrapper (``s2lct.wrappers: fluent``): seeds found by the ``sentence``
    rules, read for their form (``engine/s2lct/fluent.py``), embedded in the first
    template of the first form the seed has (``templates``: form -> alternatives, one drawn
    per seed; forms: ``clause``, ``past`` (the clause in the past tense), ``np`` (a noun
    phrase, or the predicate of "it is ...")). ``{s}`` is the seed; other ``{name}``
    fields are drawn from ``choose[name]``."""

    label: str  # the cases' expected label (follows from the wrapper and the seed's polarity)
    accepts: list[str] = Field(default_factory=list)
    sentence: list[str] = Field(min_length=1)
    templates: dict[Literal["clause", "past", "np"], list[str]] = Field(min_length=1)
    choose: dict[str, list[str]] = Field(default_factory=dict)
    max_words: int = Field(default=20, ge=1)  # longer seeds are refused (a wrapper around them reads badly)
    # Seeds with a negation are refused: "Do I think it never works? No, I don't." is a
    # double negation a reader has to untangle (questions answered "no", negating wrappers).
    exclude_negated: bool = False

    @model_validator(mode="after")
    def _placeholders(self) -> FluentWrapper:
        import re

        for form, options in self.templates.items():
            if not options:
                raise ValueError(f"templates.{form} is empty")
            for t in options:
                if "{s}" not in t:
                    raise ValueError(f"template {t!r} has no {{s}} (the seed)")
                unknown = set(re.findall(r"\{(\w+)\}", t)) - {"s"} - set(self.choose)
                if unknown:
                    raise ValueError(f"template {t!r} names {sorted(unknown)}, which 'choose' does not list")
        return self


class CapabilitySpec(Section):
    id: str
    name: str
    description: str = ""
    search: list[SearchRule] = Field(min_length=1)
    transforms: list[Transform] = Field(default_factory=list)
    recheck_rule: bool = False  # expansions must satisfy the search rule again (LC1, LC2)
    # Fluent wrappers (s2lct.wrappers: fluent, the default); ``transforms`` keep the
    # paper's literal wording (s2lct.wrappers: paper). Without ``fluent`` the transforms
    # (or the search alone) make the seeds in both modes, fluent mode checking the found
    # sentences' form and polarity first.
    fluent: list[FluentWrapper] = Field(default_factory=list)

    @model_validator(mode="after")
    def _references(self) -> CapabilitySpec:
        names = [r.name for r in self.search]
        if len(set(names)) != len(names):
            raise ValueError("search rule names repeat")
        for w in self.fluent:
            for ref in w.sentence:
                if ref not in names:
                    raise ValueError(f"fluent wrapper refers to unknown search rule '{ref}'")
        for t in self.transforms:
            for part in t.parts:
                for ref in part.sentence or []:
                    if ref not in names:
                        raise ValueError(f"transform refers to unknown search rule '{ref}'")
        if not self.transforms and any(r.label is None for r in self.search):
            raise ValueError("a capability without transforms needs a label on every search rule")
        return self

    def rule(self, name: str) -> SearchRule:
        return next(r for r in self.search if r.name == name)


def capability_files(paths: list[str] | None) -> list[Path]:
    """YAML files named by ``paths`` (files or folders); None or empty: the built-in 11."""
    files: list[Path] = []
    for raw in paths or [str(BUILTIN_DIR)]:
        p = Path(raw).expanduser()
        if p.is_dir():
            found = sorted(list(p.glob("*.yaml")) + list(p.glob("*.yml")))
            if not found:
                raise ConfigError(f"{p}: no capability files (*.yaml) in this folder")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise ConfigError(f"{p}: capability file not found")
    return files


def load_capability(path: Path) -> CapabilitySpec:
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a capability file is a mapping (id, name, search, transforms)")
    try:
        return CapabilitySpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {format_error(exc)}") from None


def load_capabilities(paths: list[str] | None = None) -> list[CapabilitySpec]:
    specs = [load_capability(f) for f in capability_files(paths)]
    ids = [s.id for s in specs]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"capability id(s) defined twice: {', '.join(repeated)}")
    return specs


class LabelNote(Section):
    """What a capability's search rules cannot find on a corpus because it lacks a label."""

    capability: str  # capability id
    missing: dict[str, str]  # rule name -> the label it needs that the corpus does not have
    proxied: list[str]  # rules whose missing neutral label the lexicon proxy stands in for
    transforms: int  # transforms (or, without transforms, rules) that can still build seeds
    of: int  # all transforms (rules)
    message: str

    @property
    def seedless(self) -> bool:
        return self.transforms == 0


def label_notes(
    specs: list[CapabilitySpec],
    corpus_labels: set[str],
    *,
    neutral_label: str = "neutral",
    neutral_proxy: bool = True,
    fluent: bool = False,
) -> list[LabelNote]:
    """One note per capability whose search rules need a label the corpus does not have:
    which rules, whether the neutral proxy stands in, and how many of its transforms (with
    ``fluent``: its fluent wrappers, which build the seeds then) can still build seeds
    (none: the capability gets no seeds)."""
    have = ", ".join(sorted(corpus_labels, key=str)) or "none"
    notes = []
    for spec in specs:
        missing = {r.name: r.label for r in spec.search if r.label is not None and r.label not in corpus_labels}
        if not missing:
            continue
        proxied = [name for name, label in missing.items() if neutral_proxy and label == neutral_label]
        usable = {r.name for r in spec.search if r.name not in missing or r.name in proxied}
        if fluent and spec.fluent:
            ok = sum(bool(set(w.sentence) & usable) for w in spec.fluent)
            of, unit = len(spec.fluent), "fluent wrappers"
        elif spec.transforms:
            ok = sum(all(set(p.sentence) & usable for p in t.parts if p.sentence) for t in spec.transforms)
            of, unit = len(spec.transforms), "transforms"
        else:
            ok, of, unit = len(usable), len(spec.search), "search rules"
        needs = ", ".join(f"'{label}' (rule {name})" for name, label in missing.items())
        parts = [f"{spec.id}: needs label {needs}, which the corpus does not have (its labels: {have})"]
        if proxied:
            parts.append(
                f"the neutral proxy stands in for '{neutral_label}' (a sentence without any polar word counts as neutral)"
            )
        elif any(label == neutral_label for label in missing.values()):
            parts.append(f"the neutral proxy is off (s2lct.neutral_proxy), so no sentence counts as '{neutral_label}'")
        if ok == 0:
            parts.append("this capability gets NO seeds")
        elif ok < of:
            parts.append(f"only {ok} of its {of} {unit} can build seeds")
        else:
            parts.append("it still gets seeds" + (f" (all {of} {unit} can build them)" if of > 1 else ""))
        notes.append(
            LabelNote(
                capability=spec.id, missing=missing, proxied=proxied, transforms=ok, of=of, message="; ".join(parts)
            )
        )
    return notes


def check_corpus_labels(
    specs: list[CapabilitySpec],
    corpus_labels: set[str],
    *,
    neutral_label: str = "neutral",
    neutral_proxy: bool = True,
    fluent: bool = False,
) -> list[LabelNote]:
    """``label_notes``, or a one-line ``InputError`` when the corpus labels share nothing
    with the labels the rules need (e.g. 0/1 against negative/positive: a label map is missing)."""
    from checkray.engine.errors import InputError

    needed = {r.label for s in specs for r in s.search if r.label is not None}
    if needed and not (needed & corpus_labels):
        have = ", ".join(sorted(corpus_labels, key=str)) or "none"
        example = ",".join(
            f"{lab}={name}" for lab, name in zip(sorted(corpus_labels, key=str), ("negative", "positive"))
        )
        raise InputError(
            f"s2lct: the corpus labels ({have}) match none of the labels the capabilities' search rules need "
            f"({', '.join(sorted(needed))}); map them to names, e.g. corpus.labels / --labels {example}"
        )
    return label_notes(specs, corpus_labels, neutral_label=neutral_label, neutral_proxy=neutral_proxy, fluent=fluent)
