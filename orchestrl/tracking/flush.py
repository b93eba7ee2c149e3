"""``orchestrl tracking flush RUN_DIR``: sends what a run dir's tracking journal still holds.

A driver whose tracking server never came back leaves its journal session folder under
``RUN_DIR/tracking_journal/`` (see :mod:`orchestrl.tracking.journal`). Flushing reopens each
session, oldest first, and sends its entries in order to the server the session wrote to (or
``--tracking-uri``). Runs created during the outage are created then, with their recorded start
and end times. The cursor advances after every entry, so a second flush, or one after a flush that
stopped part-way, sends nothing twice. A session still held by a running driver is left alone.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from orchestrl.tracking.journal import Echo, JournalBusy, reopened, sessions, stderr_echo
from orchestrl.tracking.store import RunStore


@dataclass
class FlushReport:
    """What one session's flush sent, and what is left in it."""

    folder: Path
    uri: str
    sent: Counter[str] = field(default_factory=Counter)
    created: dict[str, str] = field(default_factory=dict)
    """Runs the flush created: provisional id -> the server's id."""
    left: int = 0
    dropped: int = 0
    """Metric batches the session dropped at its bound (never journalled)."""
    refused: list[str] = field(default_factory=list)
    busy: bool = False

    def lines(self) -> list[str]:
        if self.busy:
            return [f"{self.folder}: in use by a running orchestrl process; left alone"]
        ops = ", ".join(f"{n} {op}" for op, n in sorted(self.sent.items()))
        lines = [
            f"{self.folder}: sent {sum(self.sent.values())} writes to {self.uri}"
            + (f" ({ops})" if ops else "")
        ]
        lines += [f"  run {old} is {new}" for old, new in self.created.items()]
        lines += [f"  refused by the server, skipped: {why}" for why in self.refused]
        if self.dropped:
            lines.append(f"  {self.dropped} metric batches had been dropped at the journal's bound")
        if self.left:
            lines.append(f"  {self.uri} unreachable: {self.left} writes still wait here")
        return lines


def flush_run_dir(
    run_dir: Path, tracking_uri: str | None = None, echo: Echo = stderr_echo
) -> list[FlushReport]:
    """Sends every journal session under ``run_dir``; one report per session."""
    reports = []
    for folder in sessions(run_dir):
        try:
            with reopened(folder, echo=echo) as journal:
                uri = tracking_uri or journal.uri
                journal.uri = uri
                journal.send = RunStore(uri).apply
                known = dict(journal.tally.ids)
                journal.drain()
                reports.append(
                    FlushReport(
                        folder,
                        uri,
                        sent=Counter(journal.tally.sent),
                        created={k: v for k, v in journal.tally.ids.items() if k not in known},
                        left=journal.pending,
                        dropped=journal.tally.dropped,
                        refused=list(journal.tally.refused),
                    )
                )
        except JournalBusy:
            reports.append(FlushReport(folder, "", busy=True))
    return reports
