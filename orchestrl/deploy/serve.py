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
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from orchestrl.deploy.endpoints import RequestError, ServedTeam, build_endpoints

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


class TeamRouter:
    """HTTP semantics without the server: (method, path, body bytes) -> (status, JSON)."""

    def __init__(self, team: ServedTeam) -> None:
        self.endpoints = build_endpoints(team)
        self.index = {
            "checkpoint": team.checkpoint,
            "family": team.family,
            **team.policy.describe(),
            "endpoints": {path: "POST" for path in sorted(self.endpoints)},
            **({"databases": sorted(team.databases)} if team.databases else {}),
        }

    def handle(self, method: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        path = "/" + path.strip("/")
        if path == "/":
            return (200, self.index) if method == "GET" else _error(405, "method", "GET / only")
        endpoint = self.endpoints.get(path)
        if endpoint is None:
            return _error(404, "path", f"no endpoint {path} (endpoints: {', '.join(sorted(self.endpoints))})")
        if method != "POST":
            return _error(405, "method", f"{path} takes POST, not {method}")
        try:
            data = json.loads(body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "body", "not valid JSON")
        if not isinstance(data, dict):
            return _error(400, "body", "expected a JSON object")
        try:
            return 200, endpoint(data)
        except RequestError as err:
            return _error(err.status, err.field, err.message)


def _error(status: int, field: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": f"{field}: {message}", "field": field}


def team_deployment(replicas: int = 1, cpus: float = 1.0) -> Any:
    """The Serve deployment of :class:`TeamDeployment`, with its replica count and CPUs per replica."""
    from ray import serve

    return serve.deployment(
        TeamDeployment,
        name="team",
        num_replicas=replicas,
        max_ongoing_requests=32,
        ray_actor_options={"num_cpus": cpus},
    )


class TeamDeployment:
    """A Serve replica: a :class:`TeamRouter` behind Starlette's request and response."""

    def __init__(self, team: ServedTeam) -> None:
        import torch

        torch.set_num_threads(1)  # one request at a time per replica; more threads only contend
        self.router = TeamRouter(team)

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        status, payload = self.router.handle(request.method, request.url.path, await request.body())
        return JSONResponse(payload, status_code=status)


def start(
    team: ServedTeam,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    replicas: int = 1,
    cpus: float = 1.0,
    verbose: bool = False,
) -> str:
    """Deploys ``team`` on the connected Ray (Serve's HTTP proxy on ``host:port``); returns the URL."""
    from ray import serve

    if not verbose:
        logging.getLogger("ray.serve").setLevel(logging.WARNING)  # Serve's own progress lines
    serve.start(http_options={"host": host, "port": port})
    app = team_deployment(replicas, cpus).bind(team)
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
