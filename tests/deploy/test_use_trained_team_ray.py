"""A real `orchestrl train` run used three ways: its summary names the checkpoint, its MLflow
model acts, `orchestrl evaluate RUN_ID` nests under it, and `orchestrl serve`'s Ray Serve app
answers HTTP on 127.0.0.1 (concurrent requests, bad requests; with a token and limits: 401, 413,
hostile bodies, a flood answered 200 or 503 with Retry-After), then shuts down (a real local Ray)."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import mlflow
import pytest
from deploy_helpers import tiny
from multinode import free_port
from typer.testing import CliRunner

from orchestrl.cli import app, summary_table
from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import ServedTeam
from orchestrl.deploy.limits import ServeLimits
from orchestrl.deploy.team import find_team
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import to_json
from orchestrl.tracking import names
from orchestrl.tracking.models import tracking_uri
from orchestrl.tracking.store import RunStore
from orchestrl.training.train import TrainSummary, train

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def trained(ray_local: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainSummary:
    run_dir = tmp_path_factory.mktemp("use") / "runs"
    data = tiny("mappo", stop={"iterations": 1}, tracking={"checkpoint_every": 0})
    return train(validate_config({**data, "run_dir": str(run_dir)}), echo=lambda _: None)


def observations(team: Any, seeds: range) -> list[dict[str, Any]]:
    ppo = team.rllib_config("train")
    env = ppo.env(ppo.env_config)
    try:
        return [{a: o.tolist() for a, o in env.reset(seed=s)[0].items()} for s in seeds]
    finally:
        env.close()


def test_train_prints_the_checkpoint_and_logs_a_policy_model_that_acts(trained: TrainSummary) -> None:
    assert summary_table(trained).splitlines()[-1].split() == ["checkpoint", trained.checkpoint]
    store = RunStore(trained.tracking_uri)
    run = store.run(trained.run_id)
    experiment = store.client.get_experiment_by_name("tiny_mappo")
    assert experiment.tags[names.TAG_EXPERIMENT_KIND] == names.EXPERIMENT_KIND_TRAINING
    team = find_team(trained.run_id, tracking_uri=trained.tracking_uri)
    policy = team.policy(team.rllib_config("train"))
    obs = observations(team, range(3))
    with tracking_uri(trained.tracking_uri):
        model = mlflow.pyfunc.load_model(run.tags[names.TAG_MODEL])
    assert model.predict(obs) == [to_json(policy.act(policy.observations(o))) for o in obs]


def test_evaluate_a_training_run_by_its_id(trained: TrainSummary) -> None:
    run_dir = str(Path(trained.run_path).parents[2])
    result = CliRunner().invoke(app, ["evaluate", trained.run_id, "--episodes", "3", "--run-dir", run_dir])
    assert result.exit_code == 0, result.output
    assert f"nested under {trained.run_id}" in result.stdout
    assert "episode_len      5.00 [5.00, 5.00]" in result.stdout


def call(url: str, body: Any = None, method: str = "POST") -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_serve_answers_act_over_http_concurrently_and_rejects_bad_requests(trained: TrainSummary) -> None:
    team = find_team(trained.checkpoint)
    policy = team.policy(team.rllib_config("train"))
    port = free_port()
    url = serve.start(ServedTeam(policy, trained.checkpoint, "mpe"), host="127.0.0.1", port=port)
    try:
        status, index = call(f"{url}/", method="GET")
        assert status == 200 and set(index["agents"]) == {"agent_0", "agent_1"}
        assert index["endpoints"] == {"/act": "POST"}

        obs = observations(team, range(24))
        with ThreadPoolExecutor(8) as pool:  # 8 clients at once
            answers = list(pool.map(lambda o: call(f"{url}/act", {"observations": o}), obs))
        expected = [{"actions": to_json(policy.act(policy.observations(o)))} for o in obs]
        assert answers == [(200, e) for e in expected]
        assert len({json.dumps(e) for e in expected}) > 1  # the answers depend on the observations

        bad_shape = {"observations": {"agent_0": [0.0, 1.0]}}
        assert call(f"{url}/act", bad_shape) == (
            400,
            {"error": "observations.agent_0: expected shape [12], got [2]", "field": "observations.agent_0"},
        )
        assert call(f"{url}/act", {"obs": {}})[1]["field"] == "observations"
        assert call(f"{url}/act", b"{not json")[0:2] == (
            400,
            {"error": "body: not valid JSON", "field": "body"},
        )
        assert call(f"{url}/plan", {})[0] == 404
        assert call(f"{url}/act", method="GET")[0] == 405
    finally:
        serve.stop()
    assert port_closes(port, within_s=30.0)  # Serve's HTTP proxy is gone (its process exits after stop)


def port_closes(port: int, within_s: float) -> bool:
    """Whether 127.0.0.1:``port`` refuses connections within ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError:
            return True
        time.sleep(0.2)
    return False


TOKEN = "s3cret-token-0123456789"


def call_with(
    url: str, body: Any = None, method: str = "POST", **headers: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``call`` with request headers; returns the status, the JSON (or the text) and the headers."""
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            status, raw, got = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as err:
        status, raw, got = err.code, err.read(), dict(err.headers)
    try:
        return status, json.loads(raw), got
    except ValueError:
        return status, {"text": raw.decode(errors="replace")}, got


def test_serve_with_a_token_and_limits_over_http(trained: TrainSummary) -> None:
    team = find_team(trained.checkpoint)
    policy = team.policy(team.rllib_config("train"))
    port = free_port()
    limits = ServeLimits(body_bytes=4096, concurrency=1, queued=1)
    served = ServedTeam(policy, trained.checkpoint, "mpe", limits=limits)
    url = serve.start(served, host="127.0.0.1", port=port, token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"observations": observations(team, range(1))[0]}
    try:
        for reply in (
            call_with(f"{url}/act", body),
            call_with(f"{url}/", method="GET"),
            call_with(f"{url}/act", body, Authorization=f"Bearer {TOKEN[:-1]}"),
        ):
            assert reply[:2] == (
                401,
                {"error": "authorization: a valid bearer token is required", "field": "authorization"},
            )
            assert reply[2]["www-authenticate"] == "Bearer"
        assert call_with(f"{url}/", method="GET", **auth)[0] == 200
        assert call_with(f"{url}/act", body, **auth)[:2] == (
            200,
            {"actions": to_json(policy.act(policy.observations(body["observations"])))},
        )
        assert call_with(f"{url}/act", {**body, "pad": "x" * 8192}, **auth)[:2] == (
            413,
            {"error": "body: larger than 4,096 bytes (the server's limit)", "field": "body"},
        )
        for hostile in (b"{oops", b'{"observations": NaN}', b"[" * 4000, b'{"a": [1e999]}'):
            assert call_with(f"{url}/act", hostile, **auth)[0] == 400
        with ThreadPoolExecutor(16) as pool:  # a flood: 1 at a time per replica, 1 waiting
            flood = list(pool.map(lambda _: call_with(f"{url}/act", body, **auth), range(48)))
        statuses = {status for status, _, _ in flood}
        assert statuses <= {200, 503} and 200 in statuses, statuses
        assert all(h.get("retry-after") == "1" for s, _, h in flood if s == 503)
        assert call_with(f"{url}/act", body, **auth)[0] == 200  # still serving
    finally:
        serve.stop()
