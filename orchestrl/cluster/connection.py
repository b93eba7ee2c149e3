"""Reaching a cluster's Ray Jobs API: the address, a reachability probe, the client, its Ray
version, where the cluster's nodes are, and the client's exceptions as one-line errors.

Everything goes through Ray's Jobs API (:class:`ray.job_submission.JobSubmissionClient`), which
talks HTTP to the head node's dashboard, so the only thing a laptop needs is a route to that port
(``ray dashboard cluster/aws-gpu.yaml`` or ``kubectl port-forward``; see ``cluster/README.md``).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from orchestrl.cluster.errors import (
    ClusterUnreachableError,
    JobNotFoundError,
    JobsError,
    SubmitRefusedError,
    first_line,
)

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

DEFAULT_ADDRESS = "http://127.0.0.1:8265"
"""Where the Jobs API is looked for when neither ``--address`` nor ``RAY_ADDRESS`` is given."""

_TUNNEL_HINT = (
    "is the cluster up, and for a remote cluster is a tunnel open "
    "(`ray dashboard CLUSTER.yaml` or `kubectl port-forward svc/HEAD-SVC 8265:8265`)?"
)


def resolve_address(address: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The Jobs API URL: ``address`` > ``RAY_ADDRESS`` > :data:`DEFAULT_ADDRESS`.

    A bare ``host:port`` gets ``http://`` (the Jobs API is HTTP; without a scheme Ray would treat it
    as a GCS address and hang for half a minute). ``auto`` and ``ray://`` addresses name other Ray
    protocols and are refused with a hint.
    """
    env = os.environ if env is None else env
    raw = (address or env.get("RAY_ADDRESS") or DEFAULT_ADDRESS).strip().rstrip("/")
    origin = "--address" if address else ("RAY_ADDRESS" if env.get("RAY_ADDRESS") else "default")
    if raw == "auto" or raw.startswith(("ray://", "anyscale://")):
        raise SubmitRefusedError(
            f"{origin}={raw!r} is not a Jobs API address; pass the dashboard URL, "
            f"e.g. --address {DEFAULT_ADDRESS}"
        )
    if "://" not in raw:
        raw = "http://" + raw
    parsed = urlparse(raw)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise SubmitRefusedError(f"{origin}={raw!r} is not an http(s) URL of a Ray dashboard")
    return raw


def _probe(address: str, timeout_s: float) -> None:
    """Fails fast with a clear message when nothing listens at ``address``.

    The Jobs client itself sends requests without a timeout, so a firewalled address would hang
    for minutes before the OS gives up.
    """
    parsed = urlparse(address)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((parsed.hostname, port), timeout=timeout_s):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise ClusterUnreachableError(f"{_unreachable_prefix(address)} ({reason}); {_TUNNEL_HINT}") from None


def _unreachable_prefix(address: str) -> str:
    return f"cannot reach the Ray Jobs API at {address}"


def connect(address: str | None = None, *, timeout_s: float = 10.0) -> JobSubmissionClient:
    """A Jobs API client for ``address`` (resolved by :func:`resolve_address`), checked to answer."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    url = resolve_address(address)
    _probe(url, timeout_s)
    try:
        return JobSubmissionClient(url)
    except AuthenticationError as err:
        raise ClusterUnreachableError(
            f"{url} refused the request ({first_line(str(err))}); the cluster uses token auth: "
            "export RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (see cluster/README.md)"
        ) from None
    except (ConnectionError, OSError) as err:
        # Something listens (the probe passed) but does not speak the Jobs API: often the GCS port.
        raise ClusterUnreachableError(
            f"{_unreachable_prefix(url)} ({first_line(str(err))}); is that the dashboard's port "
            "(8265 unless changed), not the GCS port (6379)?"
        ) from None
    except RuntimeError as err:
        raise ClusterUnreachableError(
            f"{url} does not look like a Ray dashboard ({first_line(str(err))})"
        ) from None


def cluster_ray_version(client: JobSubmissionClient) -> str | None:
    """The Ray version the cluster runs, as reported when the client connected (None if unknown)."""
    # JobSubmissionClient records the version from its connection check; there is no public getter.
    return getattr(client, "_server_ray_version", None)


@contextlib.contextmanager
def translated_errors(address: str, job_id: str | None = None) -> Iterator[None]:
    """Turns the Jobs client's exceptions inside the block into one-line :class:`JobsError` messages
    (:class:`JobNotFoundError` for a 404 when the block is about ``job_id``)."""
    from ray.exceptions import AuthenticationError

    try:
        yield
    except AuthenticationError as err:
        raise ClusterUnreachableError(f"{address} refused the request ({first_line(str(err))})") from None
    except RuntimeError as err:
        text = str(err)
        if job_id is not None and ("404" in text or "does not exist" in text):
            raise JobNotFoundError(f"no job {job_id!r} on the cluster at {address}") from None
        raise JobsError(f"the Jobs API at {address} failed: {first_line(text)}") from None
    except OSError as err:  # requests' ConnectionError is an OSError
        raise ClusterUnreachableError(f"{_unreachable_prefix(address)} ({first_line(str(err))})") from None


def local_ips() -> set[str]:
    """Every IP address of this machine's interfaces (plus loopback)."""
    import ray  # noqa: F401  (also puts the psutil bundled in Ray's wheel on sys.path)

    ips = {"127.0.0.1", "::1"}
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            ips.update(
                a.address.split("%")[0] for a in addrs if a.family in (socket.AF_INET, socket.AF_INET6)
            )
    except ImportError:  # pragma: no cover - psutil ships inside the ray wheel
        with contextlib.suppress(OSError):
            ips.update(info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None))
    return ips


def cluster_on_this_machine(address: str | None = None) -> bool:
    """True when every node of the cluster at ``address`` has one of this machine's IPs.

    Only then do driver, workers and the user share a disk. A loopback *address* alone proves
    nothing: SSH tunnels and port-forwards also end on 127.0.0.1. Any doubt answers False.
    """
    from ray.util.state import list_nodes

    url = resolve_address(address)
    try:
        nodes = list_nodes(address=url, raise_on_missing_output=False)
    except Exception:  # the state API is best-effort here: unknown means "not this machine"
        return False
    alive = [n for n in nodes if getattr(n, "state", "ALIVE") == "ALIVE"]
    if not alive:
        return False
    local = local_ips()
    return all(n.node_ip in local for n in alive)
