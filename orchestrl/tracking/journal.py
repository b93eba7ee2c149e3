"""A write-ahead journal of tracking writes: what lets a run outlive its tracking server.

:class:`~orchestrl.tracking.store.RunStore` hands every write it makes to a remote MLflow server
(a run created, params, metrics, tags, artifacts, a status) to a :class:`Journal`, one session
folder per driver process under ``<run_dir>/tracking_journal/``. The journal appends the write
to its entries file as a JSON line, then sends it. While the server answers, the send follows at
once and the file is only a write-ahead record. When a send fails because the server cannot be
reached, that write and every later one stay queued. A write then returns right after its append,
with no network call, and a background thread retries (0.5 s, doubling to 5 s between tries). When
the server answers again, it sends the queue in order.

A run created while writes are queued gets a provisional id (``<hex>-pending``). Later writes may
name it: the replay swaps it, wherever it appears as a whole value, for the id the server gives.
The ``cursor`` file holds the byte offset of the first unsent entry, rewritten in place after
every entry sent; ``state.json`` holds the id map and the server's URI. So a journal reopened
later (``orchestrl tracking flush RUN_DIR``) sends only what is left. A send that failed may
still have reached the server (the connection broke after the request), and is repeated: a run
whose creation's answer was lost is found by its key (tag ``orchestrl.run_key``) instead of being
created twice; a metric batch keeps its timestamps, and MLflow's SQL stores keep one row per
(key, step, timestamp, value), so it is stored once; params, tags, statuses and artifacts
overwrite themselves.

The bound (``tracking.journal_mb``) caps the bytes of unsent entries plus artifact copies. At the
bound, entries that carry metrics are dropped and counted, with one warning per outage; the run
folder's metrics.csv, and Tune's result.json for trials, keep every iteration. Artifacts are
journalled by path instead of copied, and are uploaded later if the files are still there. Every
other write (runs created, params, tags, statuses) is small and is still journalled, so the run
tree stays whole.

A session folder is locked (``flock``) by the process that writes it, so a flush never races a
running driver. It is removed once everything in it has been sent.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrl.tracking import names

ENTRIES = "entries-{generation}.jsonl"
STATE = "state.json"
CURSOR = "cursor"
LOCK = "lock"
BLOBS = "blobs"
PENDING_SUFFIX = "-pending"
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 5.0
"""Between retries while the server is down: 0.5 s doubling to at most 5 s."""
ROTATE_BYTES = 1 << 20
"""When nothing is queued and the entries file has grown past this, the journal starts a new one."""
UNTRANSLATED = ("run", "metrics")
"""Entry fields that never hold another run's id: the id a ``create_run`` makes, metric values."""
DROPPABLE = "metrics"
"""At the bound, an entry with this key is dropped (see the module docstring)."""

Send = Callable[[dict[str, Any]], "str | None"]
Echo = Callable[[str], Any]


class TrackingUnavailable(RuntimeError):
    """The tracking server cannot be reached, or a read would miss writes it has not taken yet."""


class JournalBusy(RuntimeError):
    """Another process holds the session folder (a driver still running)."""


def provisional_id() -> str:
    """The id a run gets when it is created while writes are queued (mapped to a real id later)."""
    return uuid.uuid4().hex[:24] + PENDING_SUFFIX


def is_provisional(value: object) -> bool:
    return isinstance(value, str) and value.endswith(PENDING_SUFFIX)


def journal_root(run_dir: Path) -> Path:
    return Path(run_dir).resolve() / names.JOURNAL_DIR


def sessions(run_dir: Path) -> list[Path]:
    """The journal session folders under ``run_dir``, oldest first."""
    root = journal_root(run_dir)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / STATE).is_file())


def stderr_echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class Queued:
    entry: dict[str, Any]
    end: int
    """Byte offset just after the entry's line: the cursor once it is sent."""
    size: int
    """Its line's bytes plus its artifact copy's bytes (what counts against the bound)."""
    in_doubt: bool = False
    """A send of it failed: the server may have applied it before the connection broke."""


@dataclass
class Tally:
    """What a journal sent, dropped and had refused (for the messages and ``flush``'s report)."""

    sent: Counter[str] = field(default_factory=Counter)
    dropped: int = 0
    refused: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)
    """Provisional run id -> the id the server gave."""

    @property
    def total(self) -> int:
        return sum(self.sent.values())


class Journal:
    """One session's queue of tracking writes (module docstring). Thread-safe: writers append
    under a short lock; sends are serialised by a second one."""

    def __init__(
        self,
        folder: Path,
        uri: str,
        send: Send | None = None,
        *,
        max_bytes: int = 256 << 20,
        echo: Echo = stderr_echo,
        retry: bool = True,
    ) -> None:
        self.folder = folder
        self.retry = retry
        """Retry in the background while the server is down (a driver's session; not ``flush``)."""
        self.uri = uri
        self.send = send
        self.max_bytes = max_bytes
        self.echo = echo
        self.tally = Tally()
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._queue: deque[Queued] = deque()
        self._queued_bytes = 0
        self._generation = 0
        self._offset = 0
        """Where the next entry is appended."""
        self._cursor = 0
        self._seq = 0
        self._down: str | None = None
        """Why the server counts as unreachable (None while it answers)."""
        self._warned_full = False
        self._sent_before_outage = 0
        self._retrier: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock_fh: Any = None
        self._file: Any = None
        self._cursor_fd: int | None = None
        self.closed = False

    # -- opening -----------------------------------------------------------------------------------
    @classmethod
    def create(cls, root: Path, uri: str, send: Send, *, max_bytes: int, echo: Echo) -> Journal:
        """A new session folder under ``root`` (a run dir's ``tracking_journal``; made on the
        first write)."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        folder = root / f"{stamp}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        return cls(folder, uri, send, max_bytes=max_bytes, echo=echo)

    @classmethod
    def reopen(cls, folder: Path, echo: Echo = stderr_echo) -> Journal:
        """An existing session folder, locked, its unsent entries queued again. Raises
        :class:`JournalBusy` when a running process holds it."""
        state = json.loads((folder / STATE).read_text())
        journal = cls(folder, state["uri"], max_bytes=state["max_bytes"], echo=echo, retry=False)
        journal._acquire()
        cursor = (folder / CURSOR).read_text().split() if (folder / CURSOR).is_file() else ["0", "0"]
        journal._generation, journal._cursor = int(cursor[0]), int(cursor[1])
        journal.tally.ids = dict(state.get("ids", {}))
        journal.tally.dropped = int(state.get("dropped", 0))
        journal._load()
        return journal

    def _acquire(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fh = (self.folder / LOCK).open("a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise JournalBusy(f"{self.folder} is in use by a running orchestrl process") from None
        self._lock_fh = fh

    def _load(self) -> None:
        """Queues the entries after the cursor (a torn last line, from a kill mid-append, is cut)."""
        path = self._entries_path()
        data = path.read_bytes() if path.is_file() else b""
        offset = self._cursor
        for line in data[self._cursor :].splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break
            offset += len(line)
            entry = json.loads(line)
            self._seq = max(self._seq, int(entry["seq"]) + 1)
            self._queue.append(Queued(entry, offset, len(line) + _size(self._blob(entry))))
        self._queued_bytes = sum(q.size for q in self._queue)
        if self._queue:  # the driver may have died during its send
            self._queue[0].in_doubt = True
        self._offset = offset
        self._file = path.open("r+b" if path.is_file() else "wb")
        self._file.truncate(offset)
        self._file.seek(offset)
        self._cursor_fd = os.open(self.folder / CURSOR, os.O_RDWR | os.O_CREAT, 0o644)

    def _entries_path(self) -> Path:
        return self.folder / ENTRIES.format(generation=self._generation)

    def _start(self) -> None:
        """Creates the session folder on the first write."""
        if self._file is not None:
            return
        self._acquire()
        self._file = self._entries_path().open("wb")
        self._cursor_fd = os.open(self.folder / CURSOR, os.O_RDWR | os.O_CREAT, 0o644)
        self._save_cursor()
        self._save_state()

    # -- writing -----------------------------------------------------------------------------------
    def submit(self, entry: dict[str, Any], copy: Path | None = None) -> None:
        """Appends ``entry`` and, unless the server is known to be down, sends what is queued (it
        included). ``copy`` is an artifact file or folder to copy into the journal should the
        entry wait."""
        with self._lock:
            if self.closed:
                raise RuntimeError(f"tracking journal {self.folder} is closed")
            self._start()
            line = self._line(entry)
            down = self._down is not None
            if down and DROPPABLE in entry and self._queued_bytes + len(line) > self.max_bytes:
                self._drop()
                return
            self._append(entry, line)
            if down:
                if copy is not None:
                    self._snapshot(self._queue[-1], copy)
                return
        self._drain(own=entry, copy=copy)

    def _line(self, entry: dict[str, Any]) -> bytes:
        entry["seq"] = self._seq
        self._seq += 1
        return (json.dumps(entry, separators=(",", ":")) + "\n").encode()

    def _append(self, entry: dict[str, Any], line: bytes) -> None:
        self._file.write(line)
        self._file.flush()
        self._offset += len(line)
        self._queue.append(Queued(entry, self._offset, len(line)))
        self._queued_bytes += len(line)

    def _drop(self) -> None:
        self.tally.dropped += 1
        self._save_state()
        if not self._warned_full:
            self._warned_full = True
            self.echo(
                f"tracking: journal {self.folder} is at its bound ({self.max_bytes / 2**20:g} MiB): "
                "metrics are dropped until the server is back (metrics.csv / result.json keep them)"
            )

    def _blob(self, entry: dict[str, Any]) -> Path:
        return self.folder / BLOBS / str(entry["seq"])

    def _snapshot(self, item: Queued, source: Path) -> None:
        """Copies an artifact into the journal (within the bound), else keeps it by path."""
        size = _size(source)
        if self._queued_bytes + size > self.max_bytes:
            self.echo(f"tracking: journal at its bound: artifact {source} is kept by path, not copied")
            return
        target = self._blob(item.entry) / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        elif source.is_file():
            shutil.copy2(source, target)
        item.size += size
        self._queued_bytes += size

    # -- sending -----------------------------------------------------------------------------------
    def _drain(self, own: dict[str, Any] | None = None, copy: Path | None = None) -> bool:
        """Sends queued entries in order until none is left (True) or the server is unreachable.

        A write the server refuses (not an outage) is never retried: when it is the caller's own
        entry (``own``) the error is raised to the caller, as without a journal; a replayed one is
        skipped with a one-line warning.
        """
        with self._send_lock:
            while True:
                with self._lock:
                    if not self._queue:
                        self._set_up()
                        return True
                    item = self._queue[0]
                if self.send is None:
                    raise RuntimeError("tracking journal has nowhere to send")
                try:
                    result = self.send(self._outgoing(item))
                except TrackingUnavailable as err:
                    with self._lock:
                        item.in_doubt = True
                        self._set_down(str(err))
                        waiting = next((q for q in self._queue if q.entry is own), None)
                        if waiting is not None and copy is not None:
                            self._snapshot(waiting, copy)
                    return False
                except Exception as err:
                    self._sent(item, None, refused=f"{item.entry['op']} seq {item.entry['seq']}: {err}")
                    if item.entry is own:
                        raise
                    self.echo(f"tracking: the server refused a journalled {item.entry['op']}: {err}; skipped")
                    continue
                self._sent(item, result)

    def _outgoing(self, item: Queued) -> dict[str, Any]:
        """The entry as sent: provisional ids swapped for real ones, a copied artifact's path, and
        ``in_doubt`` if an earlier send of it failed (the sender then checks before repeating a
        write that is not idempotent). A provisional id without a real one here means the server
        refused to create that run."""
        entry = item.entry
        out = {k: v if k in UNTRANSLATED else self._translate(v, LookupError) for k, v in entry.items()}
        if "path" in entry and self._blob(entry).is_dir():
            out["path"] = str(self._blob(entry) / Path(entry["path"]).name)
        if item.in_doubt:
            out["in_doubt"] = True
        return out

    def _translate(self, value: Any, missing: type[Exception]) -> Any:
        if isinstance(value, dict):
            return {k: self._translate(v, missing) for k, v in value.items()}
        if isinstance(value, list):
            return [self._translate(v, missing) for v in value]
        if is_provisional(value):
            if value not in self.tally.ids:
                raise missing(f"run {value} has not been created on the tracking server")
            return self.tally.ids[value]
        return value

    def _sent(self, item: Queued, result: str | None, refused: str | None = None) -> None:
        with self._lock:
            self._queue.popleft()
            self._queued_bytes -= item.size
            self._cursor = item.end
            op = item.entry["op"]
            if refused:
                self.tally.refused.append(refused)
            else:
                self.tally.sent[op] += 1
            run = item.entry.get("run")
            if is_provisional(run) and isinstance(result, str):
                self.tally.ids[run] = result
                self._save_state()
            if "path" in item.entry:
                shutil.rmtree(self._blob(item.entry), ignore_errors=True)
            if not self._queue and self._offset > ROTATE_BYTES:
                self._rotate()
            else:
                self._save_cursor()

    def _rotate(self) -> None:
        """Nothing is queued: continue in a fresh entries file (the cursor switches to it in one
        write)."""
        old = self._entries_path()
        self._file.close()
        self._generation += 1
        self._offset = self._cursor = 0
        self._file = self._entries_path().open("wb")
        self._save_cursor()
        old.unlink(missing_ok=True)

    def _save_cursor(self) -> None:
        """The entries file's generation and the cursor, in one fixed-size write in place (cheaper
        than a rename per entry sent)."""
        assert self._cursor_fd is not None
        os.pwrite(self._cursor_fd, f"{self._generation:010d} {self._cursor:020d}\n".encode(), 0)

    def _save_state(self) -> None:
        state = {
            "uri": self.uri,
            "ids": self.tally.ids,
            "dropped": self.tally.dropped,
            "max_bytes": self.max_bytes,
            "pid": os.getpid(),
        }
        tmp = self.folder / (STATE + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.folder / STATE)

    def _set_down(self, why: str) -> None:
        if self._down is not None:
            return
        self._down = why
        self._warned_full = False
        self._sent_before_outage = self.tally.total
        self.echo(f"tracking: {self.uri} unreachable; tracking writes wait in {self.folder}")
        if self.retry and not self._stop.is_set():
            self._retrier = threading.Thread(target=self._retry, name="orchestrl-tracking-retry", daemon=True)
            self._retrier.start()

    def _set_up(self) -> None:
        if self._down is None:
            return
        self._down = None
        sent = self.tally.total - self._sent_before_outage
        self.echo(f"tracking: {self.uri} is back; sent the {sent} writes that waited, in order")

    def _retry(self) -> None:
        delay = RETRY_FIRST_S
        while not self._stop.wait(delay):
            if self._drain():
                return
            delay = min(delay * 2, RETRY_MAX_S)

    # -- reading and closing -----------------------------------------------------------------------
    @property
    def pending(self) -> int:
        return len(self._queue)

    @property
    def down(self) -> bool:
        return self._down is not None

    def resolve(self, run_id: str) -> str:
        """The server's id for ``run_id``; raises :class:`TrackingUnavailable` while a provisional
        id has no real one yet."""
        return self._translate(run_id, TrackingUnavailable)

    def settle(self) -> None:
        """Before a read: raises :class:`TrackingUnavailable` while the server is down, or when
        queued writes (which the read would miss) cannot be sent now."""
        if self._down is not None:
            raise TrackingUnavailable(f"{self.uri} unreachable ({self.pending} writes waiting)")
        if self._queue and not self._drain():
            raise TrackingUnavailable(f"{self.uri} unreachable ({self.pending} writes waiting)")

    def drain(self) -> bool:
        """One attempt to send everything queued (``flush`` and :meth:`close` use it)."""
        return self._drain()

    def close(self) -> None:
        """Stops the retries, tries once more to send what waits, and says where the rest is.
        An emptied session folder is removed."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        self._stop.set()
        if self._retrier is not None:
            self._retrier.join()
        if self._file is None:
            return
        if self._queue and self.retry:
            self._drain()
        self._file.close()
        if self._cursor_fd is not None:
            os.close(self._cursor_fd)
        if self._queue and self.retry:
            self.echo(
                f"tracking: {self.uri} did not come back: {self.pending} writes wait in {self.folder}; "
                f"upload them with: orchestrl tracking flush {self.folder.parents[1]}"
            )
        elif not self._queue:
            shutil.rmtree(self.folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                self.folder.parent.rmdir()  # the last session of the run dir
        if self._lock_fh is not None:
            self._lock_fh.close()


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return 0


# -- one journal per run dir and server in a process -------------------------------------------------
_OPEN: dict[tuple[Path, str], Journal] = {}
_OPEN_LOCK = threading.Lock()


def shared_journal(root: Path, uri: str, send: Send, *, max_bytes: int, echo: Echo) -> Journal:
    """The process's open journal under ``root`` (a run dir's ``tracking_journal``) for ``uri``,
    made if there is none, so that a driver's stores (a sweep's parent run and its trial logger)
    write one ordered queue."""
    key = (root, uri)
    with _OPEN_LOCK:
        journal = _OPEN.get(key)
        if journal is None or journal.closed:
            journal = _OPEN[key] = Journal.create(root, uri, send, max_bytes=max_bytes, echo=echo)
        return journal


def close_shared(journal: Journal) -> None:
    with _OPEN_LOCK:
        for key, open_journal in list(_OPEN.items()):
            if open_journal is journal:
                del _OPEN[key]
    journal.close()


@atexit.register
def _close_all() -> None:
    for journal in list(_OPEN.values()):
        with contextlib.suppress(Exception):
            close_shared(journal)


@contextlib.contextmanager
def reopened(folder: Path, echo: Echo = stderr_echo) -> Iterator[Journal]:
    journal = Journal.reopen(folder, echo=echo)
    try:
        yield journal
    finally:
        journal.close()
