"""`orchestrl serve` on a network, without Ray: the bearer token (refused to start off loopback
without one, 401 on a missing or wrong one), each limit's status (413, 400, 504, 503 with
Retry-After), hostile bodies (4xx, and the router still answers), and the Serve deployment's
backpressure options. The same over real HTTP on Ray Serve: test_use_trained_team_ray.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import RequestError, ServedTeam, remaining_s
from orchestrl.deploy.limits import TOKEN_ENV, ServeLimits, TokenError, is_loopback, resolve_token
from orchestrl.deploy.team import find_team
from orchestrl.envs.registry import ENVS

TOKEN = "s3cret-token-0123456789"
ACT = {"observations": {"agent_0": [0.0], "agent_1": [1.0]}}


@pytest.fixture(scope="module")
def team(runs: dict[str, Any]) -> ServedTeam:
    checkpoint, _ = runs["matrix"]
    found = find_team(str(checkpoint))
    return ServedTeam(found.policy(found.rllib_config("train")), str(checkpoint), "matrix")


def router_of(team: ServedTeam, token: str | None = None, **limits: Any) -> serve.TeamRouter:
    return serve.TeamRouter(replace(team, limits=ServeLimits(**limits)), token)


def post(router: serve.TeamRouter, path: str, body: Any, **headers: str) -> serve.Reply:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return router.reply("POST", path, raw, headers)


# ------------------------------------------------------------------------------------ the token


def test_off_loopback_serve_refuses_to_start_without_a_token(
    runs: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    checkpoint, _ = runs["matrix"]
    result = CliRunner().invoke(app, ["serve", str(checkpoint), "--host", "0.0.0.0"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --host 0.0.0.0: serving beyond loopback needs a token"
    )
    short = tmp_path / "short.txt"
    short.write_text("abc\n")
    result = CliRunner().invoke(
        app, ["serve", str(checkpoint), "--host", "0.0.0.0", "--token-file", str(short)]
    )
    assert result.exit_code == 2
    assert (
        result.stderr.strip()
        == f"error: --token-file {short}: the token must be at least 16 characters, no spaces"
    )


def test_the_token_comes_from_the_file_else_the_environment() -> None:
    assert resolve_token("127.0.0.1", None, {}) is None  # loopback: as before
    assert resolve_token("::1", None, {}) is None and resolve_token("localhost", None, {}) is None
    assert resolve_token("0.0.0.0", None, {TOKEN_ENV: f" {TOKEN}\n"}) == TOKEN
    assert resolve_token("127.0.0.1", None, {TOKEN_ENV: TOKEN}) == TOKEN  # a token on loopback is used
    for host in ("0.0.0.0", "10.1.2.3", "myhost.example", "::"):
        assert not is_loopback(host)
        with pytest.raises(TokenError, match="needs a token"):
            resolve_token(host, None, {})
    with pytest.raises(TokenError, match="missing"):
        resolve_token("0.0.0.0", Path("/nonexistent/missing.txt"), {TOKEN_ENV: TOKEN})


def test_the_token_file_wins_over_the_environment(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("from-the-file-0123456789\n")
    assert resolve_token("0.0.0.0", file, {TOKEN_ENV: TOKEN}) == "from-the-file-0123456789"


def test_a_missing_or_wrong_token_is_401_and_says_nothing_about_the_team(team: ServedTeam) -> None:
    router = router_of(team, TOKEN)
    refusals = [
        router.reply("GET", "/", b"", {}),
        post(router, "/act", ACT),
        post(router, "/act", ACT, Authorization=f"Bearer {TOKEN}x"),
        post(router, "/act", ACT, Authorization=f"Basic {TOKEN}"),
        post(router, "/act", ACT, Authorization=TOKEN),
        post(router, "/nowhere", ACT),  # no route is revealed either
        post(router, "/act", b"{oops"),
    ]
    for reply in refusals:
        assert reply.status == 401
        assert reply.payload == {
            "error": "authorization: a valid bearer token is required",
            "field": "authorization",
        }
        assert reply.headers == {"WWW-Authenticate": "Bearer"}
    good = post(router, "/act", ACT, authorization=f"Bearer {TOKEN}")
    assert good.status == 200 and set(good.payload["actions"]) == {"agent_0", "agent_1"}
    index = router.reply("GET", "/", b"", {"Authorization": f"bearer {TOKEN}"})
    assert index.status == 200 and index.payload["checkpoint"] == team.checkpoint


def test_without_a_token_nothing_is_asked(team: ServedTeam) -> None:
    router = router_of(team)
    assert router.handle("GET", "/", b"")[0] == 200
    assert post(router, "/act", ACT).status == 200


def test_the_token_is_compared_in_constant_time(team: ServedTeam, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return a == b

    monkeypatch.setattr(serve.hmac, "compare_digest", spy)
    assert post(router_of(team, TOKEN), "/act", ACT, Authorization="Bearer guess").status == 401
    assert compared == [(b"guess", TOKEN.encode())]


# ------------------------------------------------------------------------------------ limits


def test_a_body_beyond_the_limit_is_413(team: ServedTeam) -> None:
    router = router_of(team, body_bytes=200)
    assert post(router, "/act", ACT).status == 200
    big = {**ACT, "padding": "x" * 200}
    reply = post(router, "/act", big)
    assert (reply.status, reply.payload["field"]) == (413, "body")
    assert "larger than 200 bytes" in reply.payload["error"]
    assert router.reply("POST", "/act", b"{}", {}, oversized=True).status == 413


def test_the_replica_reads_no_further_than_the_limit() -> None:
    class Request:
        def __init__(self, chunks: list[bytes], declared: str | None) -> None:
            self.headers = {} if declared is None else {"content-length": declared}
            self.chunks, self.read = chunks, 0

        async def stream(self) -> Any:
            for chunk in self.chunks:
                self.read += 1
                yield chunk

    declared = Request([b"x" * 10] * 5, "5000")
    assert asyncio.run(serve.read_body(declared, 100)) == (b"", True)
    assert declared.read == 0  # refused on its Content-Length, unread
    streamed = Request([b"x" * 60] * 5, None)
    assert asyncio.run(serve.read_body(streamed, 100)) == (b"", True)
    assert streamed.read == 2  # stopped at the chunk that crossed the limit
    assert asyncio.run(serve.read_body(Request([b"ab", b"cd"], "4"), 100)) == (b"abcd", False)


class SlowEndpoint:
    """An endpoint whose work takes ``seconds`` and stops when its request's time is up."""

    path = "/slow"
    summary = "sleeps"
    started = threading.Event()
    release = threading.Event()
    ended: ClassVar[list[str]] = []

    def __init__(self, team: ServedTeam) -> None:
        pass

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        SlowEndpoint.started.set()
        if body.get("wait"):
            SlowEndpoint.release.wait(10)
            return {"waited": True}
        deadline = time.monotonic() + float(body.get("seconds", 0))
        while time.monotonic() < deadline:
            if remaining_s() <= 0:
                SlowEndpoint.ended.append("stopped")
                raise RequestError("request", "out of time", status=504)
            time.sleep(0.01)
        SlowEndpoint.ended.append("finished")
        return {"slept": body.get("seconds", 0)}


@pytest.fixture
def slow(team: ServedTeam, monkeypatch: pytest.MonkeyPatch) -> ServedTeam:
    entry = ENVS["matrix_game"]
    monkeypatch.setitem(ENVS, "matrix_game", replace(entry, endpoints=(f"{__name__}:SlowEndpoint",)))
    SlowEndpoint.started.clear()
    SlowEndpoint.release.clear()
    SlowEndpoint.ended.clear()
    return team


def test_work_beyond_the_time_limit_is_504_and_stopped(slow: ServedTeam) -> None:
    router = router_of(slow, timeout_s=0.3, concurrency=1)
    started = time.monotonic()
    reply = post(router, "/slow", {"seconds": 5})
    assert time.monotonic() - started < 2
    assert (reply.status, reply.payload["field"]) == (504, "request")  # the router's or the work's own
    deadline = time.monotonic() + 5
    while not SlowEndpoint.ended and time.monotonic() < deadline:
        time.sleep(0.02)
    assert SlowEndpoint.ended == ["stopped"]  # the work saw its deadline and ended
    assert post(router, "/slow", {"seconds": 0}).status == 200  # and its slot is free again
    assert post(router, "/act", ACT).status == 200


def test_a_full_replica_is_503_with_retry_after_and_frees_its_slots(slow: ServedTeam) -> None:
    router = router_of(slow, concurrency=1, timeout_s=0.2)
    first = router.start("POST", "/slow", b'{"wait": true}', {})
    assert isinstance(first, serve.Future) and SlowEndpoint.started.wait(5)
    assert post(router, "/slow", {"wait": True}).status == 503
    reply = post(router, "/act", ACT)
    assert reply.status == 503 and reply.headers == {"Retry-After": "1"}
    assert reply.payload["field"] == "request" and "answering 1 requests" in reply.payload["error"]
    assert router.reply("GET", "/", b"").status == 200  # the index needs no slot
    SlowEndpoint.release.set()
    assert first.result(5).payload == {"waited": True}
    assert post(router, "/act", ACT).status == 200


def test_the_deployment_bounds_ongoing_and_queued_requests() -> None:
    deployment = serve.team_deployment(2, 1.0, ServeLimits(concurrency=3, queued=7))
    assert (deployment.num_replicas, deployment.max_ongoing_requests, deployment.max_queued_requests) == (
        2,
        3,
        7,
    )
    assert deployment.backpressure_config.status_code == 503
    assert deployment.backpressure_config.retry_after_s == 1


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="timeout_s: expected a positive number"):
        ServeLimits(timeout_s=0)


# ------------------------------------------------------------------------------------ hostile bodies

DEEP = b'{"observations": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
HOSTILE = [
    (b"{oops", "not valid JSON"),
    (b"\xff\xfe{}", "not valid JSON"),
    (b"", "expected a JSON object"),
    (b'"a string"', "expected a JSON object"),
    (b'{"observations": {"agent_0": [NaN], "agent_1": [0]}}', "NaN is not a JSON number"),
    (b'{"observations": {"agent_0": [Infinity], "agent_1": [0]}}', "Infinity is not a JSON number"),
    (b'{"observations": {"agent_0": [-Infinity], "agent_1": [0]}}', "-Infinity is not a JSON number"),
    (b'{"observations": {"agent_0": [1e999], "agent_1": [0]}}', "the number 1e999 is out of range"),
    (b'{"observations": {"agent_0": [' + b"9" * 5000 + b'], "agent_1": [0]}}', "is out of range"),
    (b'{"observations": {"agent_0": [1e300], "agent_1": [0]}}', "outside Box"),
    (b'{"observations": {"agent_0": [-12345678901234], "agent_1": [0]}}', "outside Box"),
    (DEEP, "nested deeper than 32 levels"),
    (b'{"a": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32 levels"),
    (b'{"observations": "agent_0"}', "expected an object of agent -> observation"),
    (b'{"observations": {"agent_0": "0.5", "agent_1": [0]}}', "expected numbers"),
    (b'{"observations": {"agent_0": [[0.5]], "agent_1": [0]}}', "expected shape [1], got [1, 1]"),
    (b'{"observations": {"agent_0": {"x": 1}, "agent_1": [0]}}', "expected numbers"),
    (b'{"observations": {"agent_0": null, "agent_1": [0]}}', "holds NaN"),
    (b'{"observations": {"../../etc/passwd": [0]}}', "unknown agent"),
    (b'{"observations": []}', "expected an object of agent -> observation"),
]


@pytest.mark.parametrize(("body", "message"), HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_body_is_4xx_and_the_router_keeps_answering(
    team: ServedTeam, body: bytes, message: str
) -> None:
    router = router_of(team)
    reply = post(router, "/act", body)
    assert 400 <= reply.status < 500, reply
    assert message in reply.payload["error"], reply.payload
    assert post(router, "/act", ACT).status == 200


def test_an_endpoint_that_fails_is_500_with_no_detail(
    team: ServedTeam, monkeypatch: pytest.MonkeyPatch
) -> None:
    router = router_of(team)

    def broken(_: Any) -> Any:
        raise RuntimeError(f"secret detail of {team.checkpoint}")

    monkeypatch.setitem(router.endpoints, "/act", broken)
    reply = post(router, "/act", ACT)
    assert (reply.status, reply.payload["field"]) == (500, "server")
    assert "secret" not in json.dumps(reply.payload) and team.checkpoint not in json.dumps(reply.payload)


def test_start_refuses_a_host_beyond_loopback_without_a_token(team: ServedTeam) -> None:
    with pytest.raises(TokenError, match="needs a token"):
        serve.start(team, host="0.0.0.0")


def test_an_endpoint_not_marked_concurrent_answers_one_request_at_a_time(slow: ServedTeam) -> None:
    # Three slots: the second request's work (waiting for the endpoint's lock until its deadline)
    # may still hold its slot for a moment after its 504 is sent (slots are freed when work ends,
    # by design), and /act must find one free then. With two, a loaded machine answered it 503.
    router = router_of(slow, concurrency=3, timeout_s=0.5)
    calls: list[float] = []
    original = SlowEndpoint.__call__

    def counted(self: SlowEndpoint, body: Mapping[str, Any]) -> dict[str, Any]:
        calls.append(time.monotonic())
        return original(self, body)

    SlowEndpoint.__call__ = counted  # type: ignore[method-assign]
    try:
        first = router.start("POST", "/slow", b'{"wait": true}', {})
        assert isinstance(first, serve.Future) and SlowEndpoint.started.wait(5)
        reply = post(router, "/slow", {"seconds": 0})  # waits for the first, past its own time limit
        assert (reply.status, reply.payload["field"]) == (504, "request")
        assert len(calls) == 1
        assert post(router, "/act", ACT).status == 200  # /act is concurrent: it does not wait
        SlowEndpoint.release.set()
        assert first.result(5).payload == {"waited": True}
        assert post(router, "/slow", {"seconds": 0}).status == 200
    finally:
        SlowEndpoint.__call__ = original  # type: ignore[method-assign]
