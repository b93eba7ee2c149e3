"""The caches processes share (the task store, the warm-start store): files written whole or not
at all, so a reader never sees a half-written file and concurrent writers of one file leave one
whole file, and the digest of the code a cached object depends on, so changed code misses the
cache instead of reading stale objects."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import BinaryIO


def source_digest(package: Path, libraries: tuple[str, ...]) -> str:
    """A digest of every module of ``package``, its subpackages included, and of the Python
    version and the installed versions of ``libraries``."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(str(sys.version_info[:2]).encode())
    for library in libraries:
        digest.update(f" {library} {version(library)}".encode())
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


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
