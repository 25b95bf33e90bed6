"""Prompt templates as files (``jobs/prompts/*.txt``), rendered into chat messages.

A file has ``### system`` and ``### user`` sections; ``{field}`` placeholders are filled
by ``render``. An optional ``### grammar`` section holds a GBNF grammar of the answer
format (used for constrained decoding, ``GenerationParams.grammar``); it is not a message
and is not formatted, so GBNF's ``{m,n}`` repetitions are safe there. A missing field is an error naming the prompt and the field, so a prompt
edit cannot silently send a literal ``{input_text}`` to the model.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from checkray.engine.errors import ConfigError

PROMPT_DIR = Path(__file__).resolve().parent.parent / "jobs" / "prompts"
_SECTION = re.compile(r"^### (system|user|assistant|grammar)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    sections: tuple[tuple[str, str], ...]  # (role, text) in file order
    grammar: str | None = None  # GBNF of the expected answer, if the file has one

    @property
    def fields(self) -> set[str]:
        return {f for _, text in self.sections for _, f, _, _ in string.Formatter().parse(text) if f}

    def render(self, **values: object) -> list[dict[str, str]]:
        missing = self.fields - values.keys()
        if missing:
            raise ConfigError(f"prompt '{self.name}': no value for {sorted(missing)}")
        return [{"role": role, "content": text.format(**values)} for role, text in self.sections]


def parse_prompt(name: str, text: str) -> PromptTemplate:
    parts = _SECTION.split(text)
    if len(parts) < 3:
        raise ConfigError(f"prompt '{name}': no '### system' / '### user' sections")
    found = [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]
    grammars = [text for role, text in found if role == "grammar"]
    if len(grammars) > 1:
        raise ConfigError(f"prompt '{name}': more than one '### grammar' section")
    sections = tuple((role, text) for role, text in found if role != "grammar")
    if not sections:
        raise ConfigError(f"prompt '{name}': no '### system' / '### user' sections")
    return PromptTemplate(name, sections, grammars[0] + "\n" if grammars else None)


@cache
def load_prompt(name: str, directory: str | None = None) -> PromptTemplate:
    """``load_prompt("mft_generate")`` reads ``jobs/prompts/mft_generate.txt``."""
    path = Path(directory or PROMPT_DIR) / f"{name}.txt"
    if not path.is_file():
        raise ConfigError(f"prompt '{name}': file {path} not found")
    return parse_prompt(name, path.read_text(encoding="utf-8"))
