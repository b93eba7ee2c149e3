"""What a served team accepts, and who may ask: the limits of ``orchestrl serve`` and its token.

:class:`ServeLimits` holds every limit as a typed setting with its default (``orchestrl serve``
has an option for each); the router (:mod:`orchestrl.deploy.serve`) enforces the generic ones,
an endpoint reads those that concern it from :attr:`orchestrl.deploy.endpoints.ServedTeam.limits`.

=====================  =========  ======  =====================================================
setting                default    status  what it bounds
=====================  =========  ======  =====================================================
``body_bytes``         16 MiB     413     a request body (``/plan`` carries whole CSV files)
``json_depth``         32         400     nesting of the JSON body
``timeout_s``          30 s       504     one request's work; the work is stopped (``/ask``'s
                                          SQL by SQLite's progress handler, ``/plan``'s
                                          search at the deadline, each of its pipelines by
                                          the sandbox's CPU and wall limits)
``concurrency``        4          503     requests one replica works on at once (``Retry-After``)
``queued``             32         503     requests waiting at Serve's proxy for a free replica
``table_rows``         200,000    413     rows per table of a ``/plan`` request
``table_columns``      64         413     columns per table of a ``/plan`` request
``question_chars``     1,000      413     characters of an ``/ask`` question
``result_rows``        1,000      (200)   rows an ``/ask`` query may return; more is an answer
                                          with ``error`` set and no rows
=====================  =========  ======  =====================================================

**Token.** Serving beyond loopback needs a bearer token (``--token-file PATH`` or the environment
variable :data:`TOKEN_ENV`); :func:`resolve_token` refuses to go on without one. With a token every
route needs ``Authorization: Bearer <token>``, ``GET /`` included (its index names the checkpoint's
path and the databases); on loopback without a token nothing is asked.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

TOKEN_ENV = "ORCHESTRL_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
RETRY_AFTER_S = 1
"""``Retry-After`` (seconds) on a 503: a replica's slots free in a request's time."""


@dataclass(frozen=True)
class ServeLimits:
    """The limits of one served team (module docstring); each replica enforces them."""

    body_bytes: int = 16 * 1024 * 1024
    json_depth: int = 32
    timeout_s: float = 30.0
    concurrency: int = 4
    queued: int = 32
    table_rows: int = 200_000
    table_columns: int = 64
    question_chars: int = 1000
    result_rows: int = 1000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not value > 0:
                raise ValueError(f"{name}: expected a positive number, got {value}")


class TokenError(ValueError):
    """No usable token where one is needed; the message is one line naming the fix."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


def resolve_token(host: str, token_file: Path | None, environ: dict[str, str] | None = None) -> str | None:
    """The bearer token from ``token_file`` (else :data:`TOKEN_ENV`); None on loopback without one.

    Raises :class:`TokenError` when ``host`` is beyond loopback and no token is given, or the token
    is shorter than :data:`MIN_TOKEN_CHARS` or unreadable."""
    env = os.environ if environ is None else environ
    if token_file is not None:
        try:
            token = token_file.expanduser().read_text().strip()
        except OSError as err:
            raise TokenError(f"--token-file {token_file}: {err.strerror or err}") from None
        source = f"--token-file {token_file}"
    else:
        token = env.get(TOKEN_ENV, "").strip()
        source = TOKEN_ENV
    if not token:
        if is_loopback(host):
            return None
        raise TokenError(
            f"--host {host}: serving beyond loopback needs a token (--token-file PATH or {TOKEN_ENV}); "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))' > token.txt"
        )
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        raise TokenError(f"{source}: the token must be at least {MIN_TOKEN_CHARS} characters, no spaces")
    return token
