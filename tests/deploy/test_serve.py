"""`orchestrl serve` without Ray: the HTTP semantics of the team's router (status codes, JSON errors
naming the field), the per-family endpoint seam, and the command's refusals before Ray starts.
The Ray Serve app over real HTTP is in test_use_trained_team_ray.py."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import RequestError, ServedTeam
from orchestrl.deploy.team import find_team
from orchestrl.envs.registry import ENVS


@pytest.fixture(scope="module")
def team(runs: dict[str, Any]) -> ServedTeam:
    checkpoint, _ = runs["matrix"]
    found = find_team(str(checkpoint))
    return ServedTeam(found.policy(found.rllib_config("train")), str(checkpoint), "matrix")


def post(router: serve.TeamRouter, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return router.handle("POST", path, raw)


def test_act_and_the_index(team: ServedTeam) -> None:
    router = serve.TeamRouter(team)
    status, index = router.handle("GET", "/", b"")
    assert status == 200
    assert index["agents"]["agent_0"] == {
        "module": "shared",
        "observation": "Box(0.0, 1.0, (1,), float32)",
        "action": "Discrete(3)",
    }
    assert index["endpoints"] == {"/act": "POST"}
    status, answer = post(router, "/act", {"observations": {"agent_0": [0.0], "agent_1": [1.0]}})
    expected = team.policy.act(team.policy.observations({"agent_0": [0.0], "agent_1": [1.0]}))
    assert (status, answer) == (200, {"actions": expected})


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field", "message"),
    [
        ("POST", "/act", b"{oops", 400, "body", "not valid JSON"),
        ("POST", "/act", [1, 2], 400, "body", "expected a JSON object"),
        ("POST", "/act", {"obs": {}}, 400, "observations", "required"),
        ("POST", "/act", {"observations": {"agent_0": [0.5, 1]}}, 400, "observations.agent_0", "shape"),
        ("POST", "/act", {"observations": {"bob": [0.5]}}, 400, "observations.bob", "unknown agent"),
        ("GET", "/act", b"", 405, "method", "/act takes POST, not GET"),
        ("POST", "/", {}, 405, "method", "GET / only"),
        ("POST", "/plan", {}, 404, "path", "no endpoint /plan (endpoints: /act)"),
    ],
)
def test_a_bad_request_gets_4xx_and_names_the_field(
    team: ServedTeam, method: str, path: str, body: Any, status: int, field: str, message: str
) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    got, payload = serve.TeamRouter(team).handle(method, path, raw)
    assert got == status
    assert payload["field"] == field
    assert payload["error"].startswith(f"{field}: ") and message in payload["error"]


class EchoEndpoint:
    """A family's own endpoint, as /plan and /ask plug in."""

    path = "/echo"
    summary = "text -> the same text"

    def __init__(self, team: ServedTeam) -> None:
        self.family = team.family

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if "text" not in body:
            raise RequestError("text", "required")
        return {"family": self.family, "text": body["text"]}


def test_an_env_family_adds_its_endpoints(team: ServedTeam, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = ENVS["matrix_game"]
    monkeypatch.setitem(ENVS, "matrix_game", replace(entry, endpoints=(f"{__name__}:EchoEndpoint",)))
    router = serve.TeamRouter(team)
    assert router.index["endpoints"] == {"/act": "POST", "/echo": "POST"}
    assert post(router, "/echo", {"text": "hi"}) == (200, {"family": "matrix", "text": "hi"})
    assert post(router, "/echo", {}) == (400, {"error": "text: required", "field": "text"})
    other = serve.TeamRouter(ServedTeam(team.policy, team.checkpoint, "mpe"))
    assert other.index["endpoints"] == {"/act": "POST"}


def test_serve_refuses_a_bad_target_or_a_busy_port_before_ray(runs: dict[str, Any]) -> None:
    checkpoint, _ = runs["matrix"]
    result = CliRunner().invoke(app, ["serve", str(checkpoint.parent)])
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("not a checkpoint (no learner_group/learner/rl_module inside)")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", str(checkpoint), "--port", str(port)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: --port {port}: 127.0.0.1:{port} is already in use"
