"""The errors the cluster package raises on purpose, each with a one-line message.

The CLI prints ``str(err)`` after ``error:`` and exits non-zero without a traceback: 2 for a
:class:`SubmitRefusedError` (nothing was sent), 1 for the rest (see :mod:`orchestrl.cluster.cli`).
"""

from __future__ import annotations


class JobsError(Exception):
    """Base class of every error the cluster package raises on purpose; ``str(err)`` is one line."""


class ClusterUnreachableError(JobsError):
    """No Ray Jobs API answers at the address (down, wrong port, no tunnel, or refused auth)."""


class JobNotFoundError(JobsError):
    """The cluster knows no job with that id."""


class SubmitRefusedError(JobsError, ValueError):
    """The submission is refused before anything is sent (bad command, path or address)."""


class LocalTrackingStoreError(SubmitRefusedError):
    """A cluster job would write MLflow data to a local file or SQLite store nobody else can read."""


def first_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of ``text``, cut to ``limit`` characters: how a multi-line message
    from Ray (a traceback, an HTTP body) enters a one-line error."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."
