"""Console output shared by the jobs: one line per stage, and progress of long steps, with rich."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

# soft_wrap: a line is never broken at 80 columns when stderr is not a terminal (CI logs, `make demo > log`)
console = Console(stderr=True, highlight=False, soft_wrap=True)


def stage_printer(job: str) -> Callable[[str, str], None]:
    def show(stage: str, status: str) -> None:
        style = {"cached": "dim", "running": "bold"}.get(status, "green")
        console.print(f"[{style}]{job} · {stage}: {status}[/{style}]")

    return show


def progress_bar() -> Progress:
    """A bar per task with done/total and the time left, drawn only on a terminal (a log
    file gets the caller's status lines instead) and removed when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
        transient=True,
    )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


@contextmanager
def item_progress(label: str, total: int, unit: str = "items", every: float = 0.1) -> Iterator[Callable[[int], None]]:
    """Progress of ``total`` items, yielding ``advance(n)``: a rich bar on a terminal;
    elsewhere a line each time another ``every`` share is done, with the time left
    (estimated from the items done so far)."""
    bar = progress_bar()
    task = bar.add_task(label, total=max(total, 1))
    start, state = time.perf_counter(), {"done": 0, "shown": 0}

    def advance(n: int) -> None:
        state["done"] += n
        done = state["done"]
        bar.update(task, completed=done)
        step = int(done / max(total, 1) / every)
        if console.is_terminal or step <= state["shown"]:
            return
        state["shown"] = step
        elapsed = time.perf_counter() - start
        left = elapsed * (total - done) / done if done else 0.0
        tail = f"~{_minutes(left)} left" if done < total else f"done in {_minutes(elapsed)}"
        console.print(f"[dim]{label}: {done}/{total} {unit}, {tail}[/dim]", soft_wrap=True)

    with bar:
        yield advance


@contextmanager
def step_progress(label: str, unit: str = "steps", every: float = 0.1) -> Iterator[Callable[[int, int], None]]:
    """``item_progress`` for a loop that knows its total only once it runs (a fine-tune
    counts its steps after oversampling): yields ``report(done, total)``; the bar starts at
    the first report."""
    state = {"done": 0}
    with ExitStack() as stack:

        def report(done: int, total: int) -> None:
            if "advance" not in state:
                state["advance"] = stack.enter_context(item_progress(label, total, unit, every))
            state["advance"](done - state["done"])
            state["done"] = done

        yield report
