"""`orchestrl train` end to end: a real local Ray, a real MLflow SQLite store, resume, and the UI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from orchestrl.experiment.config import validate_config
from orchestrl.tracking import names
from orchestrl.tracking import store as tracking
from orchestrl.training.train import train

pytestmark = pytest.mark.ray


def tiny_config(run_dir: Path) -> dict:
    return {
        "name": "it_mappo",
        "seed": 1,
        "run_dir": str(run_dir),
        "env": {"name": "simple_spread", "kwargs": {"N": 3, "max_cycles": 10}},
        "algorithm": {"name": "mappo"},
        "model": {"hidden": [32]},
        "resources": {"env_runners": 1, "envs_per_env_runner": 2, "cpus_per_env_runner": 1},
        "training": {"train_batch_size": 400, "minibatch_size": 200, "num_epochs": 1},
        "stop": {"iterations": 2},
        "tracking": {"checkpoint_every": 1},
    }


@pytest.fixture(scope="module")
def finished_run(ray_local: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    run_dir = tmp_path_factory.mktemp("it") / "runs"
    lines: list[str] = []
    summary = train(validate_config(tiny_config(run_dir)), echo=lines.append)
    assert summary.iterations == 2
    assert len([line for line in lines if line.startswith("iter ")]) == 2
    return run_dir, summary.run_id


def test_run_holds_params_metrics_artifacts_and_tags(finished_run: tuple[Path, str]) -> None:
    run_dir, run_id = finished_run
    client = tracking.client(tracking.default_tracking_uri(run_dir))
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "it_mappo"
    params = run.data.params
    assert params["algorithm.name"] == "mappo"
    assert params["env.kwargs.N"] == "3"
    assert len(params) < 60  # our keys, not RLlib's 300
    history = tracking.metric_history(client, run_id)
    assert [s for s, _ in history["team_return_sum_mean"]] == [1, 2]
    for key in (
        "shared/vf_explained_var",
        "shared/policy_loss",
        "shared/entropy",
        "env_steps_per_s",
        "learner_time_s",
    ):
        assert key in history, key
    tags = run.data.tags
    assert tags["ray_version"].startswith("2.")
    assert "torch_version" in tags and "git_commit" in tags
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"config.yaml", "learning_curve.png", "metrics.csv", "checkpoint"} <= artifacts
    assert (run_dir / "mlflow.db").is_file()
    assert (run_dir / "mlartifacts").is_dir()


def test_resume_continues_the_same_run(finished_run: tuple[Path, str]) -> None:
    run_dir, run_id = finished_run
    placeholder = validate_config(tiny_config(run_dir))
    summary = train(placeholder, resume=run_id, stop_iters=3, echo=lambda _: None)
    assert summary.run_id == run_id
    client = tracking.client(tracking.default_tracking_uri(run_dir))
    steps = [s for s, _ in tracking.metric_history(client, run_id)["team_return_sum_mean"]]
    assert steps == [1, 2, 3]
    env_steps = dict(tracking.metric_history(client, run_id)["env_steps"])
    assert env_steps[3] > env_steps[2]
    assert client.get_run(run_id).data.tags[names.TAG_ITERATION] == "3"


def test_resume_of_an_unknown_run_is_a_clear_error(run_dir: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrl.cli",
            "train",
            "--resume",
            "0" * 32,
            "--run-dir",
            str(run_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: --resume {'0' * 32}: no such run in the tracking store"


def test_ui_serves_the_run(finished_run: tuple[Path, str]) -> None:
    run_dir, run_id = finished_run
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrl.cli",
            "ui",
            "--run-dir",
            str(run_dir),
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/get?run_id={run_id}"
        body = None
        deadline = time.time() + 90
        while time.time() < deadline and body is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:
                    body = json.loads(resp.read())
            except OSError:
                time.sleep(1)
        assert body is not None, "the MLflow UI did not come up"
        run = body["run"]
        assert run["info"]["run_id"] == run_id
        assert any(p["key"] == "algorithm.name" for p in run["data"]["params"])
        assert any(m["key"] == "team_return_sum_mean" for m in run["data"]["metrics"])
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


def test_cli_lists_envs_and_algorithms() -> None:
    envs = subprocess.run([sys.executable, "-m", "orchestrl.cli", "envs"], capture_output=True, text=True)
    algos = subprocess.run([sys.executable, "-m", "orchestrl.cli", "algos"], capture_output=True, text=True)
    assert envs.returncode == algos.returncode == 0
    assert {"simple_spread", "simple_speaker_listener", "simple_reference"} <= {
        line.split()[0] for line in envs.stdout.splitlines()
    }
    assert {"ippo", "mappo"} <= {line.split()[0] for line in algos.stdout.splitlines()}


def test_end_only_evaluation_runs_on_the_held_out_env_config(ray_local: Path, tmp_path: Path) -> None:
    data = tiny_config(tmp_path / "runs")
    data["stop"] = {"iterations": 1}
    data["evaluation"] = {"interval": 0, "episodes": 4, "env_overrides": {"max_cycles": 5}}
    summary = train(validate_config(data), echo=lambda _: None)
    assert summary.last["episode_len_mean"] == 10  # training episodes
    client = tracking.client(tracking.default_tracking_uri(tmp_path / "runs"))
    evaluated = client.get_run(summary.run_id).data.metrics
    assert "eval/team_return_sum_mean" in evaluated
    assert summary.evaluation["eval/episode_len_mean"] == 5  # the held-out env config, not training's
