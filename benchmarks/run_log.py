"""Run logs of long benchmarks: one tagged JSON line per finished run, so that a run split over
several invocations (or one cut short) loses only the runs still training, and ``--summarise``
rebuilds the report from the lines alone."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
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
