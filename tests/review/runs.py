"""Small run directories to review: a templates run and a COSTELLO run under a demo-like
root, written as the jobs write them (marker, manifest, published suite), with hostile text."""

from __future__ import annotations

import json
from pathlib import Path

from checkray.engine.rundir import RunDir
from checkray.engine.schema import make_cases

P = "<script>alert(1)</script><img src=x onerror=alert(1)>"
CAPS = ("Vocabulary", "Negation", "Robustness")


def _job(root: Path, job: str, name: str, table) -> None:
    run = RunDir(str(root / job))
    run.claim(job)
    run.write_table(name, table)
    run.write_text("manifest.json", json.dumps({"job": job, "published": [name], "config": {}}))
    run.record_owned([name, "manifest.json"])


def make_run(root: Path, n_templates: int = 30, n_triples: int = 6) -> Path:
    """``root`` as a 'demo' run holding ``templates/`` (``n_templates`` cases over three
    capabilities, one with a script payload) and ``costello/`` (``n_triples`` CR1 triples)."""
    top = RunDir(str(root))
    top.claim("demo")
    rows = []
    for i in range(n_templates):
        cap = CAPS[i % len(CAPS)]
        text = f"case {i}: this movie is {'good' if i % 2 else 'bad'}."
        if i == 1:
            text = f"{P} a hostile case"
        rows.append(
            {
                "suite": "s",
                "method": "template",
                "capability": cap,
                "text": text,
                "expected_label": "positive" if i % 2 else "negative",
                "test_type": "MFT",
                "meta": {"template": f"{{x}} template {i % 4}", "description": f"{cap} <b>desc</b>"},
            }
        )
    _job(root, "templates", "suite.parquet", make_cases(rows))
    triples = []
    for t in range(n_triples):
        tid = f"triple{t}"
        for role, text in (("seed", "the film is good"), ("closer", "the film is great"), ("farther", P)):
            triples.append(
                {
                    "suite": "costello",
                    "method": "costello",
                    "capability": "CR1",
                    "text": f"{text} #{t}",
                    "test_type": "MFT",
                    "expected_label": "positive",
                    "relation": None if role == "seed" else role,
                    "meta": {"triple": tid, "role": role},
                }
            )
    _job(root, "costello", "triples.parquet", make_cases(triples))
    top.record_owned(["templates", "costello"])
    return root
