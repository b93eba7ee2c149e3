"""``orchestrl serve``: a trained team behind HTTP JSON endpoints, on Ray Serve.

One Serve application (``orchestrl``, route prefix ``/``) with one deployment,
:class:`TeamDeployment`, whose replicas each hold the team's policy. The policy travels to the
replicas inside the application (Ray ships it), so on a cluster (``--address``) no replica needs
the checkpoint on its disk.

Routes:

- ``GET /``: what is served (checkpoint, env, algorithm, agents and their spaces, endpoints);
- ``POST /act``, for every env: ``{"observations": {agent: observation}}`` ->
  ``{"actions": {agent: action}}``, the greedy joint action
  (:class:`~orchestrl.experiment.policy.TrainedPolicy`; observations as the env the team trained on
  gives them, JSON numbers and lists, objects for Dict spaces);
- the endpoints of the team's env family, declared in its registry entry
  (:mod:`orchestrl.deploy.endpoints`): ``POST /plan`` for an orchestration team, ``POST /ask`` for
  a Text2SQL team.

A bad request gets HTTP 4xx and ``{"error": "<field>: <what is wrong>", "field": "<field>"}``,
the field as a dotted path (``observations.agent_0``); an unknown route 404, a wrong method 405.

Who may ask and how much (:mod:`orchestrl.deploy.limits`): with a token (required beyond
loopback) every request carries ``Authorization: Bearer <token>`` or gets 401; a body beyond its
size 413; a full replica 503 with ``Retry-After``; work beyond the time limit 504 (stopped, see
:class:`TeamRouter`). Every request is idempotent: ``/act``, ``/plan`` and ``/ask`` are functions
of their body that write nothing the next request reads, so a client may retry one that failed.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from orchestrl.deploy.endpoints import DEADLINE, Endpoint, RequestError, ServedTeam, build_endpoints
from orchestrl.deploy.limits import RETRY_AFTER_S, ServeLimits, TokenError, is_loopback

log = logging.getLogger(__name__)

APP_NAME = "orchestrl"
SERVE_NAMESPACE = "serve"
"""The Ray namespace of Serve's controller and proxies."""
SERVE_ENVIRONMENT = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60"}
"""Set (unless already set) before a local Ray starts, so its workers inherit it: Serve's controller
kills an HTTP proxy that is not ready within 5 s (its default) and ``serve.start`` then fails with
the proxy's ActorDiedError; on a loaded 2-core machine a proxy's worker takes longer than that."""


def serve_environment() -> None:
    """Applies :data:`SERVE_ENVIRONMENT` to this process's environment (call before Ray starts)."""
    import os

    for key, value in SERVE_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, JSON payload and the headers that go with it."""

    status: int
    payload: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class TeamRouter:
    """HTTP semantics without the server: (method, path, body bytes, headers) -> (status, JSON).

    In order: the token (401), the route (404, 405), the body's size (413), a free slot of the
    replica's ``concurrency`` (503 with ``Retry-After``), then the JSON (400: not JSON, NaN or
    Infinity, a number beyond 64-bit, nesting deeper than ``json_depth``) and the endpoint, on a
    worker thread until the request's deadline (504). An endpoint answers one request at a time
    unless its class sets ``concurrent = True`` (the others wait for it, within their own time
    limit). A request's slot is freed when its work ends, not when its 504 is sent, so work past
    its deadline never piles up beyond ``concurrency``. An endpoint's unexpected exception is a
    500 that says nothing about the team (the log has it). The token is checked first, so a
    client without it learns nothing, not even which routes exist.
    """

    def __init__(self, team: ServedTeam, token: str | None = None) -> None:
        self.limits = team.limits
        self.token = token
        self.endpoints = build_endpoints(team)
        self.index = {
            "checkpoint": team.checkpoint,
            "family": team.family,
            **team.policy.describe(),
            "endpoints": {path: "POST" for path in sorted(self.endpoints)},
            **({"databases": sorted(team.databases)} if team.databases else {}),
        }
        self._slots = threading.BoundedSemaphore(self.limits.concurrency)
        self._locks = {
            path: threading.Lock()
            for path, endpoint in self.endpoints.items()
            if not getattr(endpoint, "concurrent", False)
        }
        self._workers = ThreadPoolExecutor(self.limits.concurrency, thread_name_prefix="orchestrl-request")

    def handle(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """The status and JSON payload of one request (waits for its work, at most its time limit)."""
        reply = self.reply(method, path, body, headers)
        return reply.status, reply.payload

    def reply(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        oversized: bool = False,
    ) -> Reply:
        """:meth:`handle` with the reply's headers; ``oversized``: the body was not read, being
        declared or streamed beyond ``body_bytes``."""
        started = self.start(method, path, body, headers, oversized=oversized)
        if isinstance(started, Reply):
            return started
        try:
            return started.result(timeout=self.limits.timeout_s)
        except TimeoutError:
            return self.timed_out()

    def start(
        self,
        method: str,
        path: str,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        *,
        oversized: bool = False,
    ) -> Reply | Future[Reply]:
        """The reply when it needs no work, else the future of the endpoint's work (its slot held)."""
        if self.token is not None and not self.authorized(headers or {}):
            return Reply(*_error(401, "authorization", "a valid bearer token is required"), UNAUTHORIZED)
        path = "/" + path.strip("/")
        if path == "/":
            return Reply(200, self.index) if method == "GET" else Reply(*_error(405, "method", "GET / only"))
        endpoint = self.endpoints.get(path)
        if endpoint is None:
            known = ", ".join(sorted(self.endpoints))
            return Reply(*_error(404, "path", f"no endpoint {path} (endpoints: {known})"))
        if method != "POST":
            return Reply(*_error(405, "method", f"{path} takes POST, not {method}"))
        if oversized or len(body) > self.limits.body_bytes:
            limit = f"larger than {self.limits.body_bytes:,} bytes (the server's limit)"
            return Reply(*_error(413, "body", limit))
        if not self._slots.acquire(blocking=False):
            message = f"this replica is answering {self.limits.concurrency} requests (its limit); retry"
            return Reply(*_error(503, "request", message), {"Retry-After": str(RETRY_AFTER_S)})
        deadline = time.monotonic() + self.limits.timeout_s
        try:
            return self._workers.submit(self._answer_in_slot, path, endpoint, body, deadline)
        except BaseException:
            self._slots.release()
            raise

    def timed_out(self) -> Reply:
        """The 504 of a request whose work outlived ``timeout_s``."""
        limit = f"took longer than {self.limits.timeout_s:g} s (the server's limit)"
        return Reply(*_error(504, "request", limit))

    def authorized(self, headers: Mapping[str, str]) -> bool:
        """Whether ``headers`` carry ``Authorization: Bearer <token>`` (compared in constant time)."""
        value = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        scheme, _, given = value.partition(" ")
        expected = (self.token or "").encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected)

    def close(self) -> None:
        """Stops the worker threads once their work ends."""
        self._workers.shutdown(wait=False, cancel_futures=True)

    def _answer_in_slot(self, path: str, endpoint: Endpoint, body: bytes, deadline: float) -> Reply:
        """:meth:`_answer`, freeing the request's slot before its reply is seen: a client that has
        its answer finds the slot free (a done-callback would free it only after waking the caller)."""
        try:
            return self._answer(path, endpoint, body, deadline)
        finally:
            self._slots.release()

    def _answer(self, path: str, endpoint: Endpoint, body: bytes, deadline: float) -> Reply:
        lock = self._locks.get(path)  # an endpoint not marked concurrent answers one at a time
        if lock is not None and not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            return self.timed_out()
        token = DEADLINE.set(deadline)
        try:
            data = parse_json(body, self.limits.json_depth)
            return Reply(200, endpoint(data))
        except RequestError as err:
            return Reply(*_error(err.status, err.field, err.message))
        except Exception:
            log.exception("%s failed", path)
            return Reply(*_error(500, "server", "the team could not answer; the server's log says why"))
        finally:
            DEADLINE.reset(token)
            if lock is not None:
                lock.release()


UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}
MAX_INTEGER_DIGITS = 19
"""A JSON integer of more digits is refused: no endpoint takes a number beyond 64 bits."""


def parse_json(body: bytes, max_depth: int) -> dict[str, Any]:
    """The request's JSON object; :class:`RequestError` (400, field ``body``) for anything else."""
    try:
        data = json.loads(
            body or b"null", parse_constant=_refuse_constant, parse_int=_integer, parse_float=_finite
        )
    except RequestError:
        raise
    except RecursionError:
        raise RequestError("body", f"JSON nested deeper than {max_depth} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RequestError("body", "not valid JSON") from None
    if not isinstance(data, dict):
        raise RequestError("body", "expected a JSON object")
    if json_depth(data) > max_depth:
        raise RequestError("body", f"JSON nested deeper than {max_depth} levels")
    return data


def json_depth(value: Any) -> int:
    """How deeply ``value``'s objects and arrays nest (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _refuse_constant(name: str) -> Any:
    raise RequestError("body", f"{name} is not a JSON number")


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise RequestError("body", f"the integer {text[:12]}... is out of range")
    return int(text)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RequestError("body", f"the number {text[:24]} is out of range")
    return value


def _error(status: int, field: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": f"{field}: {message}", "field": field}


def team_deployment(replicas: int = 1, cpus: float = 1.0, limits: ServeLimits | None = None) -> Any:
    """The Serve deployment of :class:`TeamDeployment`: its replica count, CPUs per replica, and
    ``limits.concurrency`` requests at once per replica with at most ``limits.queued`` waiting at
    the proxy (more: 503 with ``Retry-After``)."""
    from ray import serve
    from ray.serve.config import BackpressureConfig

    limits = limits or ServeLimits()
    return serve.deployment(
        TeamDeployment,
        name="team",
        num_replicas=replicas,
        max_ongoing_requests=limits.concurrency,
        max_queued_requests=limits.queued,
        backpressure_config=BackpressureConfig(status_code=503, retry_after_s=RETRY_AFTER_S),
        ray_actor_options={"num_cpus": cpus},
    )


class TeamDeployment:
    """A Serve replica: a :class:`TeamRouter` behind Starlette's request and response. A body
    declared or streamed beyond ``body_bytes`` is not read on."""

    def __init__(self, team: ServedTeam, token: str | None = None) -> None:
        import torch

        torch.set_num_threads(1)  # one forward pass per request; more threads only contend
        self.router = TeamRouter(team, token)

    async def __call__(self, request: Any) -> Any:
        import asyncio

        from starlette.responses import JSONResponse

        body, oversized = await read_body(request, self.router.limits.body_bytes)
        headers = dict(request.headers)
        started = self.router.start(request.method, request.url.path, body, headers, oversized=oversized)
        if isinstance(started, Reply):
            reply = started
        else:
            try:
                reply = await asyncio.wait_for(asyncio.wrap_future(started), self.router.limits.timeout_s)
            except TimeoutError:
                reply = self.router.timed_out()
        return JSONResponse(reply.payload, status_code=reply.status, headers=reply.headers)


async def read_body(request: Any, limit: int) -> tuple[bytes, bool]:
    """The request's body, or ``(b"", True)`` once it is declared or read beyond ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return b"", True
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return b"", True
        chunks.append(chunk)
    return b"".join(chunks), False


def start(
    team: ServedTeam,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    replicas: int = 1,
    cpus: float = 1.0,
    token: str | None = None,
    verbose: bool = False,
) -> str:
    """Deploys ``team`` on the connected Ray (Serve's HTTP proxy on ``host:port``); returns the URL.

    ``token``: the bearer token every request must carry (:mod:`orchestrl.deploy.limits`); a host
    beyond loopback without one raises :class:`~orchestrl.deploy.limits.TokenError`."""
    from ray import serve

    if token is None and not is_loopback(host):
        raise TokenError(f"{host}: serving beyond loopback needs a token")
    if not verbose:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # Serve's own progress lines
    serve.start(http_options={"host": host, "port": port})
    app = team_deployment(replicas, cpus, team.limits).bind(team, token)
    serve.run(app, name=APP_NAME, route_prefix="/", blocking=False)
    return f"http://{host}:{port}"


def stop(*, keep_serve: bool = False, timeout_s: float = 60.0) -> None:
    """Removes the application, and Serve's controller and HTTP proxies unless ``keep_serve``
    (a cluster's Serve may hold other applications; a local Ray's ends with its session anyway).

    Without ``keep_serve`` it returns once Serve's named actors are gone (``serve.shutdown()`` may
    return before they are), so the next Serve started in the same Ray session starts from none."""
    import ray
    from ray import serve

    serve.delete(APP_NAME)
    if keep_serve:
        return
    serve.shutdown()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(
            a.get("namespace") == SERVE_NAMESPACE for a in ray.util.list_named_actors(all_namespaces=True)
        ):
            return
        time.sleep(0.2)
    logging.getLogger(__name__).warning("Serve's actors were still alive %.0f s after shutdown", timeout_s)
