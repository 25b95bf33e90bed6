"""``checkray review``: people check generated cases, in a page on the loopback interface.

    checkray review RUN [--sample 50] [--by generator|capability] [--seed 0] [--reviewer NAME] [--port 0]
    checkray review apply RUN                       # writes reviewed_suite.parquet (reviewed_triples.parquet)
    checkray review export RUN --out sample.csv     # or .jsonl: a sample for reviewers elsewhere
    checkray review import RUN FILE --reviewer NAME # their filled file back, checked
    checkray review batch RUN --out B.jsonl [--part dev]  # the reviews as an annotation batch

RUN is a job's run directory or a demo's (every published suite below it). Decisions go
to RUN/reviews.parquet as they are made (engine/review.py).
"""

from __future__ import annotations

import getpass
import os
import socket
from pathlib import Path
from typing import Optional

import typer

from checkray.engine.errors import InputError
from checkray.engine.review import (
    ReviewStore,
    decision_row,
    decisions_from_file,
    export_units,
    labels_of,
    now,
    per_case,
    stratified_sample,
    units_of_run,
    write_batch,
    write_reviewed,
)
from checkray.jobs.console import console

ACTIONS = ("apply", "export", "import", "batch")
HOST = "127.0.0.1"


def _default_reviewer() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or "reviewer"


def review_units(run: str, sample: int | None, by: str, seed: int, store: ReviewStore) -> list[dict]:
    """The units on offer: a stratified sample, then every unit already reviewed (so a
    review made with another sample stays in view)."""
    units = units_of_run(run)
    picked = stratified_sample(units, sample if sample and sample > 0 else None, by, seed)
    chosen = {u["case_id"] for u in picked}
    reviewed = {r["case_id"] for r in store.rows()}
    return picked + [u for u in units if u["case_id"] in reviewed and u["case_id"] not in chosen]


def serve(app_state, port: int, open_socket: socket.socket | None = None) -> None:
    import uvicorn

    sock = open_socket or bind(port)
    config = uvicorn.Config(app_state.asgi(), log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


def bind(port: int) -> socket.socket:
    """A listening socket on the loopback address (port 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {HOST}:{port}: {exc.strerror}") from None
    sock.listen(64)
    return sock


def review_command(
    first: str = typer.Argument(..., metavar="RUN | apply RUN | export RUN | import RUN FILE"),
    rest: Optional[list[str]] = typer.Argument(None, hidden=True),
    sample: int = typer.Option(50, "--sample", "-n", help="Cases to review, drawn stratified (0: all)."),
    by: str = typer.Option("generator", "--by", help="Stratify the sample by generator or capability."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="Who reviews (default: the login name)."),
    port: int = typer.Option(0, "--port", help="Port on 127.0.0.1 (0: a free one)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="export, batch: the file to write."),
    part: str = typer.Option("dev", "--part", help="batch: dev or final (docs/validity.md)."),
) -> None:
    """Review generated cases in the browser; apply, export or import reviews."""
    rest = list(rest or [])
    who = (reviewer or _default_reviewer()).strip()
    if first not in ACTIONS:
        if rest:
            raise InputError(f"unexpected argument {rest[0]!r} (checkray review RUN [options])")
        return _serve(first, sample, by, seed, who, port)
    if not rest:
        raise InputError(f"checkray review {first} needs RUN")
    run = rest[0]
    if first == "apply":
        for line in write_reviewed(run):
            counts = ", ".join(f"{k} {v}" for k, v in line.items() if k not in ("run", "job", "file", "rows"))
            console.print(f"{line['file']}: {line['rows']} rows ({counts})", markup=False, soft_wrap=True)
    elif first == "export":
        if out is None:
            raise InputError("checkray review export needs --out FILE (.csv or .jsonl)")
        store = ReviewStore(run)
        units = stratified_sample(units_of_run(run), sample if sample > 0 else None, by, seed)
        export_units(units, out)
        console.print(f"wrote {out} ({len(units)} cases to review; fill 'decision')", markup=False)
        del store
    elif first == "batch":
        if out is None:
            raise InputError("checkray review batch needs --out FILE.jsonl")
        if part not in ("dev", "final"):
            raise InputError(f"--part {part!r}: expected dev or final")
        store = ReviewStore(run)
        meta = {"run": str(run), "part": part, "generator": "checkray review", "drawn": now()}
        n = write_batch(store.rows(), units_of_run(run), out, meta)
        console.print(f"wrote {out} ({n} judged cases) and its .meta.json", markup=False, soft_wrap=True)
    else:
        if len(rest) < 2:
            raise InputError("checkray review import needs RUN FILE")
        store = ReviewStore(run)
        units = {u["case_id"]: u for u in units_of_run(run)}
        decisions = decisions_from_file(Path(rest[1]), units, labels_of(units.values()))
        rows = [decision_row(units[c], who, d) for c, d in decisions.items()]
        store.append(rows)
        console.print(
            f"imported {len(rows)} decisions by {who} into {store.root / 'reviews.parquet'} "
            f"({len(per_case(store.rows()))} cases decided in all)",
            markup=False,
            soft_wrap=True,
        )


def _serve(run: str, sample: int, by: str, seed: int, reviewer: str, port: int) -> None:
    from checkray.jobs.review.app import ReviewApp

    store = ReviewStore(run)
    state = ReviewApp(store, review_units(run, sample, by, seed, store), reviewer)
    sock = bind(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}/?token={state.token}"
    console.print(
        f"reviewing {len(state.units)} cases of {run} as {reviewer}; decisions go to {store.root / 'reviews.parquet'}",
        markup=False,
        soft_wrap=True,
    )
    console.print(f"open {url}", markup=False, soft_wrap=True)
    console.print("Ctrl+C stops the server (every decision is already saved)", markup=False)
    serve(state, port, sock)
