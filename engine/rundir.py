"""Run directories: written atomically, owned by the run that created them, and locked.

A run directory is a local path or any pyarrow filesystem URI (``s3://bucket/run``).

* **Atomic writes.** Every file lands under a temporary name and is renamed (a single PUT
  on object stores), so a crash never leaves a half-written output under its real name.
* **Ownership.** ``claim(job)`` marks a directory as a checkray run the first time a run
  uses it (``.checkray-run.json``: the job, when, which checkray, and the top-level names
  the run has written). A non-empty directory without the marker is refused, as is a
  marked directory of another job, so ``--out`` pointed at a home directory, a dataset or
  another job's run never loses a file. In a claimed run, only ``stages/`` is ever deleted,
  and an existing top-level file the run did not write is never overwritten.
* **Lock.** ``lock(job)`` takes ``.checkray-lock.json`` for the length of a run, so a second
  run in the same directory stops at once with a one-line error naming the holder instead
  of deleting the first run's stages or mixing its Ray Data shards. Locally the lock is an
  exclusive create; on object stores, which have no exclusive create in pyarrow, it is a
  lease renewed by a heartbeat, won by an election: each contender writes its own claim
  under ``.checkray-lock.d/``, waits a settle delay and lists the claims; the earliest
  (by the store's timestamp) wins, so a contender that writes late always sees the
  winner's claim (see ``RunLock``). A holder that died (its process is gone, or its lease
  ran out) is replaced.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from checkray.engine.errors import InputError

log = logging.getLogger(__name__)

MARKER = ".checkray-run.json"
LOCK = ".checkray-lock.json"
CLAIMS = ".checkray-lock.d"  # object stores: one claim file per contender for the lock
STAGES = "stages"
LEASE_S = 60.0  # a lock not renewed for this long belongs to a dead run
SETTLE_S = 1.0  # object stores: wait before reading a lease back (a racing writer shows by then)


def open_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path) for a local path or a URI pyarrow understands."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri))
    try:
        return pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{uri}: cannot open filesystem: {exc}") from None


def _version() -> str:
    from checkray.engine import __version__

    return __version__


class RunDir:
    """A run directory on any pyarrow filesystem, with atomic writes.

    Constructing one touches nothing (jobs read other runs through it); ``claim`` makes it
    this run's, after which writes outside ``stages/`` respect what the run owns."""

    def __init__(self, uri: str):
        self.uri = uri
        self.fs, self.root = open_filesystem(uri)
        self.job: str | None = None  # set by claim()
        self._owned: set[str] = set()
        self._owned_lock = threading.Lock()

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    # ------------------------------------------------------------------ ownership
    def claim(self, job: str) -> None:
        """Make the directory this ``job``'s run (see the module docstring); one-line
        ``InputError`` when it belongs to someone or something else."""
        info = self.fs.get_file_info(self.root)
        if info.type == pafs.FileType.File:
            raise InputError(f"{self.uri}: is a file, not a run directory")
        marker = self._read_marker() if info.type == pafs.FileType.Directory else None
        if marker is None:
            if info.type == pafs.FileType.Directory and self._entries():
                raise InputError(
                    f"{self.uri}: not empty and not a checkray run directory (no {MARKER}); pass a new or empty --out"
                )
            self.fs.create_dir(self.root, recursive=True)
            marker = {"job": job, "created": _now(), "checkray": _version(), "owned": []}
            self._write_marker(marker)
        elif marker.get("job") != job:
            raise InputError(f"{self.uri}: holds a '{marker.get('job')}' run; pass another --out for this '{job}' run")
        self.job = job
        self._owned = set(marker.get("owned", [])) | {STAGES, MARKER, LOCK, CLAIMS}

    def record_owned(self, names: Iterable[str]) -> None:
        """Add top-level names to the marker's list of what this run wrote."""
        new = {n.split("/", 1)[0] for n in names} - self._owned
        if self.job is None or not new:
            return
        with self._owned_lock:
            self._owned.update(new)
            marker = self._read_marker() or {"job": self.job, "created": _now(), "checkray": _version()}
            marker["owned"] = sorted(self._owned - {STAGES, MARKER, LOCK, CLAIMS})
            marker["updated"] = _now()
            self._write_marker(marker)

    def _read_marker(self) -> dict[str, Any] | None:
        if not self.exists(MARKER):
            return None
        try:
            data = json.loads(self.read_text(MARKER))
        except (json.JSONDecodeError, OSError, UnicodeDecodeError):
            raise InputError(f"{self.uri}: unreadable {MARKER}; not a run directory this checkray can use") from None
        if not isinstance(data, dict):
            raise InputError(f"{self.uri}: malformed {MARKER}")
        return data

    def _write_marker(self, marker: dict[str, Any]) -> None:
        self._atomic(self.path(MARKER), lambda sink: sink.write(json.dumps(marker, indent=1).encode()))

    def _entries(self) -> list[str]:
        infos = self.fs.get_file_info(pafs.FileSelector(self.root, allow_not_found=True))
        return [i.base_name for i in infos]

    def reserve(self, rel: str) -> None:
        """Make ``rel``'s top-level entry the run's before writing it; in a claimed run,
        refuse one that exists and that the run did not write (a user's file)."""
        if self.job is None:
            return
        top = rel.split("/", 1)[0]
        if top in self._owned:
            return
        if self.exists(top):
            raise InputError(
                f"{self.uri}: '{top}' exists and was not written by this '{self.job}' run; refusing to overwrite it"
            )
        self.record_owned([top])  # persisted at once: a crash later must not orphan it

    # ------------------------------------------------------------------ lock
    def lock(self, job: str, lease_s: float = LEASE_S) -> RunLock:
        """Hold the run's lock (a context manager); see ``RunLock``."""
        return RunLock(self, job, lease_s)

    # ------------------------------------------------------------------ files
    def _atomic(self, final: str, write: Callable[[Any], None]) -> None:
        parent = final.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        tmp = f"{final}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            with self.fs.open_output_stream(tmp) as sink:
                write(sink)
            self.fs.move(tmp, final)  # rename on local disks; a single PUT on object stores
        except BaseException:
            if self.fs.get_file_info(tmp).type != pafs.FileType.NotFound:
                self.fs.delete_file(tmp)
            raise

    def write_table(self, rel: str, table: pa.Table) -> str:
        self.reserve(rel)
        final = self.path(rel)
        self._atomic(final, lambda sink: pq.write_table(table, sink))
        return final

    def write_bytes(self, rel: str, data: bytes) -> str:
        self.reserve(rel)
        final = self.path(rel)
        self._atomic(final, lambda sink: sink.write(data))
        return final

    def write_text(self, rel: str, text: str) -> str:
        return self.write_bytes(rel, text.encode("utf-8"))

    def read_table(self, rel: str, columns: list[str] | None = None) -> pa.Table:
        return pq.read_table(self.path(rel), filesystem=self.fs, columns=columns)

    def read_text(self, rel: str) -> str:
        with self.fs.open_input_stream(self.path(rel)) as src:
            return src.read().decode("utf-8")

    def supersede(self, names: Iterable[str]) -> str | None:
        """Move the run's own top-level files ``names`` (an earlier run's published outputs
        that the current one no longer stands behind) under ``stages/superseded/<time>/``:
        kept, never deleted, and no longer read as the run's results. Returns that folder
        (None: nothing to move). Names the run does not own are left where they are."""
        moving = [n for n in dict.fromkeys(names) if "/" not in n and n in self._owned and self.exists(n)]
        if not moving:
            return None
        dest = f"{STAGES}/superseded/{_now().replace(':', '')}-{uuid.uuid4().hex[:6]}"
        self.fs.create_dir(self.path(dest), recursive=True)
        for name in moving:
            self.fs.move(self.path(name), self.path(dest, name))
        return dest

    def delete_dir(self, rel: str) -> None:
        """Delete a directory under ``stages/``: the only place a run ever deletes."""
        if rel != STAGES and not rel.startswith(f"{STAGES}/"):
            raise ValueError(f"refusing to delete '{rel}': a run deletes only under {STAGES}/")
        if self.exists(rel):
            self.fs.delete_dir(self.path(rel))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


class RunLock:
    """The lock of one run directory, held from ``acquire`` (or ``with``) to ``release``.

    The lock file names its holder (job, host, pid, since) and a lease that a heartbeat
    thread renews every ``lease_s / 3``; a second run reads it and stops with a one-line
    error naming that holder. A lock whose holder is gone (same host and its pid is dead,
    or the lease expired) is stale and replaced, so a SIGKILLed run never blocks the rerun.

    On an object store the lock file is only the holder's record; who holds is decided by
    claims. A contender that finds no live lock file writes ``.checkray-lock.d/<token>.json``
    (one PUT, stamped by the store's clock), waits ``settle_s`` (>= 1 s) and lists the
    claims. It loses to any live claim marked ``held`` and to any earlier one (store
    timestamp in whole seconds, then token). Two contenders cannot both win: if Y's claim
    was not yet listed when X looked, Y wrote it at least ``settle_s`` after X did, so X's
    claim is earlier and Y, which sees it, loses; a winner marks its claim ``held`` when it
    renews it, so renewals never make it look later than a newcomer's.
    """

    def __init__(self, run: RunDir, job: str, lease_s: float = LEASE_S, settle_s: float = SETTLE_S):
        self.run, self.job, self.lease_s, self.settle_s = run, job, lease_s, settle_s
        self.token = uuid.uuid4().hex
        self.host, self.pid = socket.gethostname(), os.getpid()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.held = False

    # the lock file's content
    def _record(self) -> dict[str, Any]:
        return {
            "token": self.token,
            "job": self.job,
            "host": self.host,
            "pid": self.pid,
            "since": getattr(self, "_since", _now()),
            "expires": time.time() + self.lease_s,
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.run.read_text(LOCK))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            if not self.run.exists(LOCK):
                return None
            return {}  # unreadable: a writer is mid-way, or debris; judged by its age below

    def _stale(self, holder: dict[str, Any], path: str = LOCK) -> bool:
        if not holder:  # unreadable lock file: stale once older than a lease
            info = self.run.fs.get_file_info(self.run.path(path))
            age = time.time() - (info.mtime.timestamp() if info.mtime else 0)
            return age > self.lease_s
        if float(holder.get("expires", 0)) < time.time():
            return True
        return holder.get("host") == self.host and not _pid_alive(int(holder.get("pid", 0)))

    def _busy(self, holder: dict[str, Any]) -> InputError:
        who = (
            f"'{holder.get('job')}' run, pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}"
            if holder
            else "a run whose lock file is being written"
        )
        return InputError(
            f"{self.run.uri}: in use by another checkray run ({who}); wait for it to finish or pass another --out"
        )

    def _write_exclusive_local(self) -> bool:
        path = self.run.path(LOCK)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as f:
            json.dump(self._record(), f)
        return True

    def acquire(self) -> RunLock:
        self.run.fs.create_dir(self.run.root, recursive=True)
        self._since = _now()
        for _ in range(3):
            holder = self._read()
            if holder is not None:
                if holder.get("token") == self.token:
                    break
                if not self._stale(holder):
                    raise self._busy(holder)
                log.warning("%s: replacing the stale lock of %s", self.run.uri, holder or "an unreadable lock file")
                self._remove_if(holder)
            if self.run.is_local:
                if self._write_exclusive_local():
                    break
                continue  # someone created it between our read and our create: look again
            self._write_claim(held=False)
            time.sleep(self.settle_s)  # a claim written before ours shows in the listing by now
            winner = self._elect()
            if winner is not None:
                self._delete_claim()
                raise self._busy(winner or self._read() or {})
            self._write_claim(held=True)
            self._write_record()
            break
        else:
            raise self._busy(self._read() or {})
        self.held = True
        self._beat = threading.Thread(target=self._heartbeat, name="checkray-run-lock", daemon=True)
        self._beat.start()
        return self

    def _remove_if(self, holder: dict[str, Any]) -> None:
        now = self._read()
        if now == holder or (not holder and now in (None, {})):
            try:
                self.run.fs.delete_file(self.run.path(LOCK))
            except (FileNotFoundError, OSError):
                pass

    # object stores: the claims (see the class docstring)
    def _claim_rel(self, token: str | None = None) -> str:
        return f"{CLAIMS}/{token or self.token}.json"

    def _write_claim(self, held: bool) -> None:
        # A plain PUT, not write-and-rename: the store stamps the claim when it is written.
        with self.run.fs.open_output_stream(self.run.path(self._claim_rel())) as sink:
            sink.write(json.dumps({**self._record(), "held": held}).encode())

    def _delete_claim(self) -> None:
        try:
            self.run.fs.delete_file(self.run.path(self._claim_rel()))
        except (FileNotFoundError, OSError):
            pass

    def _write_record(self) -> None:
        self.run._atomic(self.run.path(LOCK), lambda sink: sink.write(json.dumps(self._record()).encode()))

    def _elect(self) -> dict[str, Any] | None:
        """None when this contender's claim wins, else the claim it loses to ({} if unreadable)."""
        infos = self.run.fs.get_file_info(pafs.FileSelector(self.run.path(CLAIMS), allow_not_found=True))
        mine, rivals = None, []
        for info in infos:
            if info.type != pafs.FileType.File or not info.base_name.endswith(".json"):
                continue
            rel = f"{CLAIMS}/{info.base_name}"
            try:
                data = json.loads(self.run.read_text(rel))
            except FileNotFoundError:
                continue  # released meanwhile
            except (json.JSONDecodeError, UnicodeDecodeError, OSError):
                data = {}
            if isinstance(data, dict) and data.get("token") == self.token:
                mine = info
            elif not isinstance(data, dict) or not self._stale(data, rel):
                rivals.append((info, data if isinstance(data, dict) else {}))
            else:  # a dead run's claim: debris
                try:
                    self.run.fs.delete_file(info.path)
                except (FileNotFoundError, OSError):
                    pass
        if mine is None:
            return {}  # our claim is gone: removed as stale by another run

        def order(info: pafs.FileInfo, token: str) -> tuple[int, str]:
            return (int(info.mtime.timestamp()) if info.mtime else 0, token)

        for info, data in rivals:
            if data.get("held") or order(info, str(data.get("token", ""))) < order(mine, self.token):
                return data
        return None

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            holder = self._read()
            if holder is None or holder.get("token") != self.token:
                log.warning("%s: the run lock was taken by another run: %s", self.run.uri, holder)
                return
            if not self.run.is_local:
                self._write_claim(held=True)
            self._write_record()

    def release(self) -> None:
        if not self.held:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if not self.run.is_local:
            self._delete_claim()
        holder = self._read()
        if holder is not None and holder.get("token") == self.token:
            try:
                self.run.fs.delete_file(self.run.path(LOCK))
            except (FileNotFoundError, OSError):
                pass
        self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
