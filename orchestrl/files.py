"""Files written whole or not at all, for the caches that processes share (the task store, the
warm-start store): a reader never sees a half-written file, and concurrent writers of one file
leave one whole file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> bool:
    """Calls ``write`` on a temporary file beside ``path`` and renames it into place (atomic on
    POSIX). A cache that cannot be written is skipped: returns False on an ``OSError`` (the
    temporary file removed); any other error is raised, after the same clean-up."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(dir=path.parent, suffix=".part")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(part, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(part)
        if not isinstance(exc, OSError):
            raise
        return False
    return True
