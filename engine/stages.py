"""Stage runner: each stage's Parquet output lands atomically in a run directory, and a
rerun skips every stage whose fingerprint (code version, config, inputs) is unchanged.

Layout of a run directory (a local path or any pyarrow filesystem URI, e.g. ``s3://b/run``)::

    <run>/stages/<stage>/<output>.parquet   stage outputs (or a directory of shards)
    <run>/stages/<stage>/_SUCCESS.json      commit marker, written last
    <run>/stages/<stage>.parts/<key>.parquet  per-item checkpoints of a long stage (one per
                                            model, say): they survive a crash of the stage
    <run>/<published files>                 the job's user-facing outputs

A stage directory without a matching ``_SUCCESS.json`` is debris of a crash and is
deleted before the stage runs again, so a resumed run equals an uninterrupted one.
"""

from __future__ import annotations

import contextvars
import hashlib
import io
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pydantic import BaseModel

from checkray.engine.code import code_digest
from checkray.engine.errors import InputError
from checkray.engine.rundir import RunDir, open_filesystem  # noqa: F401  (re-exported: jobs import them from here)

log = logging.getLogger(__name__)

SUCCESS = "_SUCCESS.json"


def _fingerprinted_fields(model: BaseModel) -> set[str]:
    """Fields that change what a stage computes: all but those marked NOT_FINGERPRINTED
    (``checkray.engine.config``), which only change how fast it runs."""
    return {
        name
        for name, info in type(model).model_fields.items()
        if not (isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("fingerprint") is False)
    }


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return {name: _jsonable(getattr(value, name)) for name in sorted(_fingerprinted_fields(value))}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    return value


def fingerprint(*parts: Any) -> str:
    blob = json.dumps(_jsonable(list(parts)), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:20]


def _hash_stream(fs: pafs.FileSystem, path: str, h) -> None:
    with fs.open_input_stream(path) as src:
        while chunk := src.read(1 << 20):
            h.update(chunk)


def file_digest(uri: str) -> str:
    """Content hash of an input file, so an edited corpus reruns what depends on it."""
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{uri}: file not found")
    if info.type != pafs.FileType.File:
        raise InputError(f"{uri}: not a file")
    h = hashlib.sha256()
    try:
        _hash_stream(fs, path, h)
    except OSError as exc:
        raise InputError(f"{uri}: cannot read: {exc}") from None
    return h.hexdigest()[:20]


# Directories (model folders of hundreds of MB) are fingerprinted by the relative path,
# size and modification time of every file inside, not by content: reading 400 MB per
# run to prove nothing changed would cost more than most stages. Any edit, retrain or
# copy changes a size or an mtime, so it reruns what depends on the directory.
def path_digest(uri: str) -> str:
    """Fingerprint of a file (its content) or a directory (every file's relative path,
    size and mtime, recursively) for a stage's ``external`` inputs; one-line error when
    the path does not exist. Use it for every file or directory a stage reads."""
    fs, path = open_filesystem(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise InputError(f"{uri}: not found")
    if info.type == pafs.FileType.File:
        return file_digest(uri)
    h = hashlib.sha256(b"dir\0")
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    except OSError as exc:
        raise InputError(f"{uri}: cannot list: {exc}") from None
    for entry in sorted(infos, key=lambda i: i.path):
        if entry.type != pafs.FileType.File:
            continue
        rel = entry.path[len(path.rstrip("/")) + 1 :]
        mtime = entry.mtime_ns if entry.mtime_ns is not None else 0
        h.update(f"{rel}\0{entry.size}\0{mtime}\n".encode())
    return h.hexdigest()[:20]


_CALLABLE_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def reference_digest(value: Any) -> Any:
    """What a config value that may name an input stands for, by content: a local file or
    directory -> ``path_digest``; ``module:function`` -> the module's source file; every
    string inside lists and dicts likewise; anything else (``builtin:`` assets pinned by
    the package version, hub names, numbers) as it is. Used for model specs, whose
    ``path`` and options may point at weights, pickles or code."""
    if isinstance(value, Mapping):
        return {str(k): reference_digest(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [reference_digest(v) for v in value]
    if not isinstance(value, str) or not value or value.startswith("builtin:"):
        return value
    if "://" not in value and os.path.exists(os.path.expanduser(value)):
        return {"path": value, "digest": path_digest(value)}
    if _CALLABLE_REF.match(value):
        import importlib.util

        try:
            spec = importlib.util.find_spec(value.split(":", 1)[0])
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin and os.path.isfile(spec.origin):
            return {"callable": value, "digest": file_digest(spec.origin)}
    return value


@dataclass
class Stage:
    """A pure step of a job. ``fn(ctx)`` returns ``{output_name: table}`` (the runner
    writes them) or ``None`` after writing its own files under ``ctx.stage_path``
    (used by Ray Data stages that write shards in parallel)."""

    name: str
    fn: Callable[[StageContext], Mapping[str, pa.Table] | None]
    inputs: tuple[str, ...] = ()
    config: Any = None
    version: str = "1"
    external: tuple[str, ...] = ()  # fingerprints of outside inputs (e.g. file digests)


@dataclass
class StageContext:
    run: RunDir
    stage: Stage
    done: dict[str, StageRecord]
    # Set by a stage that finished with some items failed (a model that crashed, say): its
    # outputs are used by this run, but the next run reruns it, reusing its parts.
    incomplete: str | None = None
    extra_outputs: dict[str, int] = field(default_factory=dict)  # rows of files the stage wrote itself
    parts_used: set[str] = field(default_factory=set)
    # Share of failed items a stage may carry and still be marked done (runtime.max_error_share).
    max_error_share: float = 0.0
    code: str = ""  # the stage's code digest: parts made by other code are not reused

    def item_errors(self, failed: int, total: int, what: str = "items") -> None:
        """Report how many of a stage's ``total`` items failed (LLM answers that are errors,
        models that crashed). Above ``max_error_share`` the stage is marked incomplete: this
        run uses its outputs, the next run runs it again. Failed items must never be written
        as parts, so that rerun retries exactly them and reuses the rest."""
        if failed <= 0 or total <= 0 or failed / total <= self.max_error_share:
            return
        self.mark_incomplete(f"{failed} of {total} {what} failed")

    def mark_incomplete(self, note: str) -> None:
        """This run uses the stage's outputs; the next run runs the stage again."""
        self.incomplete = f"{self.incomplete}; {note}" if self.incomplete else note

    @property
    def stage_path(self) -> str:
        return self.run.path("stages", self.stage.name)

    def _part(self, key: str, stage: str | None = None) -> str:
        code = self.done[stage].code if stage else self.code
        return f"stages/{stage or self.stage.name}.parts/{_part_name(key, code)}.parquet"

    def input_part(self, stage: str, key: str) -> pa.Table:
        """A part committed by an input stage (e.g. one model's predictions)."""
        if stage not in self.stage.inputs:
            raise KeyError(f"stage '{self.stage.name}' did not declare input '{stage}'")
        return self.run.read_table(self._part(key, stage))

    def part_keys(self, prefix: str = "") -> list[str]:
        """Keys of the parts an earlier run of this stage's current code committed."""
        folder = self.run.path("stages", f"{self.stage.name}.parts")
        suffix = f"-{self.code[:8]}.parquet" if self.code else ".parquet"
        infos = self.run.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        keys = {i.base_name[: -len(suffix)] for i in infos if i.base_name.endswith(suffix)}
        return sorted(k for k in keys if k.startswith(prefix))

    def other_code_parts(self, prefix: str = "") -> list[str]:
        """File stems (``<key>-<code>``) of parts that other code committed for this stage.
        Only for items their key alone determines (an LLM answer is keyed by the model,
        the sampling parameters and the messages): read them with ``peek_part_file`` and
        commit what is reused again under the current code; pruning drops the old files."""
        if not self.code:
            return []
        folder = self.run.path("stages", f"{self.stage.name}.parts")
        mine = f"-{self.code[:8]}.parquet"
        infos = self.run.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        return sorted(
            i.base_name[: -len(".parquet")]
            for i in infos
            if i.base_name.endswith(".parquet") and not i.base_name.endswith(mine) and i.base_name.startswith(prefix)
        )

    def peek_part_file(self, stem: str) -> pa.Table | None:
        """The part in file ``<stem>.parquet`` (any code), or None if missing or unreadable."""
        path = f"stages/{self.stage.name}.parts/{stem}.parquet"
        if not self.run.exists(path):
            return None
        try:
            return self.run.read_table(path)
        except (pa.ArrowInvalid, OSError):
            return None

    def read_part(self, key: str) -> pa.Table | None:
        """A per-item checkpoint written by an earlier (maybe crashed) run of this stage,
        or None; the part is kept when the stage completes (``peek_part`` does not keep
        it). An unreadable part is debris: ignored and recomputed."""
        self.parts_used.add(key)
        return self.peek_part(key)

    def peek_part(self, key: str) -> pa.Table | None:
        """Like ``read_part``, but the part is pruned when the stage completes unless it
        is read with ``read_part`` or rewritten: for parts that may hold stale items."""
        return self.peek_part_file(_part_name(key, self.code))

    def write_part(self, key: str, table: pa.Table) -> None:
        """Commit one item's result at once (atomically), so a crash later keeps it."""
        self.parts_used.add(key)
        self.run.write_table(self._part(key), table)

    def prune_parts(self) -> None:
        """Delete parts this run did not use (models dropped from the registry, old inputs)."""
        folder = self.run.path("stages", f"{self.stage.name}.parts")
        if not self.run.exists("stages", f"{self.stage.name}.parts"):
            return
        used = {_part_name(key, self.code) for key in self.parts_used}
        for info in self.run.fs.get_file_info(pafs.FileSelector(folder)):
            name = info.base_name
            if name.endswith(".parquet") and name[: -len(".parquet")] not in used:
                self.run.fs.delete_file(info.path)

    def input_path(self, stage: str, output: str = "data") -> str:
        return self.run.path("stages", stage, f"{output}.parquet")

    def input(self, stage: str, output: str = "data", columns: list[str] | None = None) -> pa.Table:
        if stage not in self.stage.inputs:
            raise KeyError(f"stage '{self.stage.name}' did not declare input '{stage}'")
        return pq.read_table(self.input_path(stage, output), filesystem=self.run.fs, columns=columns)


# The stage whose function is running in this thread: a job run inside a stage (the
# benchmark that s2lct, mft and testaug run) reports its own incompleteness to it.
_CURRENT: contextvars.ContextVar[StageContext | None] = contextvars.ContextVar("checkray_stage", default=None)


def current_stage() -> StageContext | None:
    """The ``StageContext`` of the stage running in this thread, if any."""
    return _CURRENT.get()


def _part_name(key: str, code: str) -> str:
    """A part's file name: its key, and the code that made it (a code change recomputes)."""
    return f"{key}-{code[:8]}" if code else key


@dataclass
class StageRecord:
    name: str
    fingerprint: str
    skipped: bool
    seconds: float
    outputs: dict[str, int] = field(default_factory=dict)  # output -> rows
    incomplete: str | None = None  # why the next run must run this stage again
    code: str = ""  # digest of the stage's code and checkray's version (parts are kept per code)
    computed_seconds: float | None = None  # what computing it took (a reused checkpoint: when it was made)


class StageRunner:
    """Runs stages in order; skips those already committed with the same fingerprint."""

    def __init__(
        self,
        run: RunDir,
        on_stage: Callable[[str, str], None] | None = None,
        max_error_share: float = 0.0,
    ):
        self.run = run
        self.done: dict[str, StageRecord] = {}
        self.on_stage = on_stage or (lambda name, status: log.info("stage %s: %s", name, status))
        self.max_error_share = max_error_share

    def _committed(self, name: str) -> dict[str, Any] | None:
        if not self.run.exists("stages", name, SUCCESS):
            return None
        try:
            return json.loads(self.run.read_text(f"stages/{name}/{SUCCESS}"))
        except (json.JSONDecodeError, OSError):
            return None

    def run_stage(self, stage: Stage) -> StageRecord:
        missing = [i for i in stage.inputs if i not in self.done]
        if missing:
            raise RuntimeError(f"stage '{stage.name}' runs before its inputs {missing}")
        # The code digest carries checkray's version: an upgrade or an edit of the code
        # a stage runs never reuses a checkpoint made by the old code.
        code = fingerprint(stage.name, stage.version, code_digest(stage.fn))
        fp = fingerprint(
            code,
            stage.config,
            list(stage.external),
            [self.done[i].fingerprint for i in stage.inputs],
        )
        marker = self._committed(stage.name)
        # The first incomplete input, named once: a chain of stages does not nest the note.
        upstream = next(
            (
                rec.incomplete if rec.incomplete.startswith("input '") else f"input '{i}': {rec.incomplete}"
                for i in stage.inputs
                if (rec := self.done[i]).incomplete
            ),
            None,
        )
        if marker and marker.get("fingerprint") == fp and not marker.get("incomplete") and not upstream:
            took = marker.get("seconds")
            rec = StageRecord(
                stage.name,
                fp,
                True,
                0.0,
                marker.get("outputs", {}),
                code=code,
                computed_seconds=float(took) if isinstance(took, int | float) else None,
            )
            self.on_stage(stage.name, "cached")
        else:
            self.run.delete_dir(f"stages/{stage.name}")  # debris or a stale result
            self.on_stage(stage.name, "running")
            start = time.perf_counter()
            ctx = StageContext(self.run, stage, self.done, max_error_share=self.max_error_share, code=code)
            token = _CURRENT.set(ctx)
            try:
                result = stage.fn(ctx)
            finally:
                _CURRENT.reset(token)
            outputs: dict[str, int] = dict(ctx.extra_outputs)
            for out_name, table in (result or {}).items():
                self.run.write_table(f"stages/{stage.name}/{out_name}.parquet", table)
                outputs[out_name] = table.num_rows
            incomplete = ctx.incomplete or upstream
            if not incomplete and ctx.parts_used:
                ctx.prune_parts()
            took = time.perf_counter() - start
            rec = StageRecord(stage.name, fp, False, took, outputs, incomplete, code, computed_seconds=took)
            self.run.write_text(
                f"stages/{stage.name}/{SUCCESS}",
                json.dumps({"fingerprint": fp, "outputs": outputs, "seconds": rec.seconds, "incomplete": incomplete}),
            )
            status = f"done in {rec.seconds:.1f}s" + (
                f" (incomplete: {incomplete}; rerun retries it)" if incomplete else ""
            )
            self.on_stage(stage.name, status)
        self.done[stage.name] = rec
        return rec

    def run_all(self, stages: list[Stage]) -> dict[str, StageRecord]:
        for stage in stages:
            self.run_stage(stage)
        return self.done

    def output(self, stage: str, output: str = "data", columns: list[str] | None = None) -> pa.Table:
        return self.run.read_table(f"stages/{stage}/{output}.parquet", columns=columns)


def table_bytes(table: pa.Table) -> bytes:
    """Parquet bytes of a table (for publishing through ``RunDir.write_bytes``)."""
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()
