"""Framing between the pool and its workers, and safe loading of what workers send back.

Messages are length-prefixed pickles over a unix socket. The parent never unpickles worker bytes
with the plain unpickler: replies may only contain builtin containers and scalars, and result
tables may only reference the pandas/numpy/pyarrow globals an ordinary table pickle uses (learned
from sample tables at import). A worker that was taken over can therefore lie about its results
but cannot run code in the parent.
"""

from __future__ import annotations

import io
import pickle
import select
import socket
import struct
import time
from typing import Any

import numpy as np
import pandas as pd

HEADER = struct.Struct("!Q")
MAX_FRAME = 1 << 30


class ProtocolError(RuntimeError):
    """A worker sent something that is not a well-formed reply."""


def encode_frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data)) + data


def send_frame(sock: socket.socket, obj: Any) -> None:
    sock.sendall(encode_frame(obj))


def recv_frame(sock: socket.socket, deadline: float | None = None) -> bytes:
    """One frame's bytes; ``TimeoutError`` past ``deadline`` (monotonic), ``EOFError`` on close."""
    header = _recv_exact(sock, HEADER.size, deadline)
    (size,) = HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes")
    return _recv_exact(sock, size, deadline)


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    buf = bytearray(size)
    view = memoryview(buf)
    got = 0
    while got < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([sock], [], [], remaining)[0]:
                raise TimeoutError("no reply before the wall-time limit")
        n = sock.recv_into(view[got:], size - got)
        if n == 0:
            raise EOFError("worker closed its channel")
        got += n
    return bytes(buf)


class _Restricted(pickle.Unpickler):
    allowed: frozenset[tuple[str, str]] = frozenset()

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise ProtocolError(f"disallowed global {module}.{name} in worker data")
        return super().find_class(module, name)


class _ReplyUnpickler(_Restricted):
    allowed = frozenset()


def load_reply(data: bytes) -> dict[str, Any]:
    """A worker's reply envelope: builtin containers and scalars only."""
    try:
        obj = _ReplyUnpickler(io.BytesIO(data)).load()
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"unreadable reply: {exc}") from None
    if not isinstance(obj, dict):
        raise ProtocolError("reply is not a mapping")
    return obj


def _table_globals() -> frozenset[tuple[str, str]]:
    """The globals that pickles of ordinary result tables reference, learned from samples."""
    seen: set[tuple[str, str]] = set()

    class Recorder(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            seen.add((module, name))
            return super().find_class(module, name)

    base = pd.DataFrame(
        {
            "s": pd.Series(["a", None, "b"], dtype="str"),
            "o": pd.Series(["1", 2.5, None], dtype="object"),
            "f": [1.0, np.nan, 3.0],
            "i": np.array([1, 2, 3], dtype="int64"),
            "b": [True, False, True],
        }
    )
    samples = [
        base,
        base[base["i"] > 1],
        base.iloc[:0],
        base.groupby("s", dropna=False)["f"].sum().reset_index(),
        base.merge(base, on="i"),
        base[["i"]].rename(columns={"i": "x"}),
        base.drop_duplicates("s"),
    ]
    for frame in samples:
        for protocol in (4, pickle.HIGHEST_PROTOCOL):
            Recorder(io.BytesIO(pickle.dumps(frame, protocol=protocol))).load()
    return frozenset(seen)


class _TableUnpickler(_Restricted):
    allowed = _table_globals()


def load_table(data: bytes) -> pd.DataFrame:
    """A result table sent by a worker; raises :class:`ProtocolError` for anything else."""
    try:
        obj = _TableUnpickler(io.BytesIO(data)).load()
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"unreadable table: {exc}") from None
    if not isinstance(obj, pd.DataFrame):
        raise ProtocolError(f"result is a {type(obj).__name__}, not a DataFrame")
    return obj
