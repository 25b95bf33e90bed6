"""Console output shared by the jobs: one line per stage, with rich."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

console = Console(stderr=True, highlight=False)


def stage_printer(job: str) -> Callable[[str, str], None]:
    def show(stage: str, status: str) -> None:
        style = {"cached": "dim", "running": "bold"}.get(status, "green")
        console.print(f"[{style}]{job} · {stage}: {status}[/{style}]")

    return show
