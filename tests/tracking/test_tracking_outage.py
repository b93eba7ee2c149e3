"""Training survives a tracking-server outage: a real ``mlflow server`` is stopped mid-run and
started again on the same port and store (or not at all), and MLflow ends up holding every
iteration of every run, in order, exactly once.

The first two tests need no server and no Ray: writes go to a port nobody listens on (a dead
server), and the journal is flushed into an embedded SQLite store. The others share one
``mlflow server`` process (SQLite backend in a temp dir) and the session's local Ray.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from multinode import MlflowServer, free_port, new_root, wait_for
from ray.tune import Callback
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.experiment.config import validate_config
from orchestrl.tracking import names
from orchestrl.tracking.flush import flush_run_dir
from orchestrl.tracking.journal import Journal, TrackingUnavailable, sessions
from orchestrl.tracking.metrics import read_metrics_csv
from orchestrl.tracking.store import RunStore, client, default_tracking_uri, metric_history
from orchestrl.training.train import train
from orchestrl.tune.curriculum import load_curriculum, run_curriculum
from orchestrl.tune.lifecycle import Launch
from orchestrl.tune.sweep import load_sweep, run_sweep

REPO = Path(__file__).resolve().parents[2]
TINY = {
    "env.kwargs": {"N": 2, "max_cycles": 5},
    "model.hidden": [16],
    "training.train_batch_size": 100,
    "training.minibatch_size": 100,
    "training.num_epochs": 1,
}


def dead_server() -> str:
    return f"http://127.0.0.1:{free_port()}"


def steps(history: dict[str, list[tuple[int, float]]], metric: str) -> list[int]:
    return [step for step, _ in history[metric]]


# -- the journal on its own ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sqlite(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    """An embedded store to flush into (made once: creating its tables takes seconds)."""
    store = RunStore(default_tracking_uri(tmp_path_factory.mktemp("store")))
    store.client.search_experiments()
    return store


def test_at_the_bound_metrics_are_dropped_and_the_run_tree_is_kept(tmp_path: Path, sqlite: RunStore) -> None:
    run_dir = tmp_path / "runs"
    lines: list[str] = []
    with RunStore(dead_server(), run_dir, journal_mb=0.01, echo=lines.append) as store:
        run = store.create_run("0", "bounded", {"kind": "test"}, {"p": 1})
        assert run.endswith("-pending")  # created during the outage: a provisional id
        for step in range(1, 151):
            store.log_metrics(run, {"x": float(step)}, step)
        store.set_tags(run, {"after": "the bound"})
        store.set_terminated(run, "FINISHED")
    assert sum("at its bound" in line for line in lines) == 1
    assert f"orchestrl tracking flush {run_dir.resolve()}" in lines[-1]
    (folder,) = sessions(run_dir)
    journalled = sum(p.stat().st_size for p in folder.glob("entries-*.jsonl"))
    assert journalled <= 0.01 * 2**20 + 500  # the bound, plus the small writes after it

    (report,) = flush_run_dir(run_dir, tracking_uri=sqlite.uri)
    assert not report.left and report.dropped > 0
    real = report.created[run]
    mlflow = sqlite.client
    kept = steps(metric_history(mlflow, real), "x")
    # the first steps up to the bound, each once, then nothing: the rest were counted as dropped
    assert kept == list(range(1, len(kept) + 1)) and len(kept) + report.dropped == 150
    stored = mlflow.get_run(real)
    assert stored.info.status == "FINISHED"  # what came after the bound still arrived
    assert stored.data.tags["after"] == "the bound" and stored.data.params == {"p": "1"}
    assert flush_run_dir(run_dir, tracking_uri=sqlite.uri) == []  # nothing is sent twice
    assert len(metric_history(mlflow, real)["x"]) == len(kept)


def test_sends_whose_answers_were_lost_are_not_applied_twice(tmp_path: Path, sqlite: RunStore) -> None:
    run_dir = tmp_path / "runs"
    with RunStore(dead_server(), run_dir, echo=lambda _: None) as store:
        run = store.create_run("0", "cut", {})
        for step in range(1, 11):
            store.log_metrics(run, {"x": float(step)}, step)
        store.set_terminated(run, "FINISHED")
    (folder,) = sessions(run_dir)

    def answer_lost_at(n: int) -> Callable[[dict[str, Any]], str | None]:
        """Sends through the store, but the n-th send's connection breaks after the request:
        the store applied it, the journal never hears so."""
        sent: list[dict[str, Any]] = []

        def send(entry: dict[str, Any]) -> str | None:
            result = sqlite.apply(entry)
            sent.append(entry)
            if len(sent) == n:
                raise TrackingUnavailable("connection lost after the request")
            return result

        return send

    for lost in (1, 6):  # the run's creation, then the metric batch of step 5
        journal = Journal.reopen(folder, echo=lambda _: None)
        journal.send = answer_lost_at(lost)
        assert not journal.drain()
        journal.close()
    (report,) = flush_run_dir(run_dir, tracking_uri=sqlite.uri)
    assert report.left == 0 and sum(report.sent.values()) == 7  # steps 5-10 and the status
    (created,) = sqlite.client.search_runs(["0"], "attributes.run_name = 'cut'")  # one run, not two
    assert steps(sqlite.metric_history(created.info.run_id), "x") == list(range(1, 11))
    assert created.info.status == "FINISHED"


# -- a real server, stopped and started again --------------------------------------------------------
@pytest.fixture(scope="module")
def server() -> Iterator[MlflowServer]:
    root = new_root("orl-out-")
    server = MlflowServer(root / "server")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def restart(server: MlflowServer, lines: list[str]) -> None:
    """Starts the server again on its port and store, then waits until the journal has sent
    what waited (its retries take at most 5 s to notice)."""
    server.start()
    wait_for(lambda: any(" is back; sent " in line for line in lines), 30, "the journal to drain")


def train_config(run_dir: Path, uri: str, iterations: int) -> Any:
    data = yaml.safe_load((REPO / "configs" / "mappo_simple_spread.yaml").read_text())
    data.update(run_dir=str(run_dir), seed=3)
    data["resources"] = {"env_runners": 0, "envs_per_env_runner": 2}
    data["stop"] = {"iterations": iterations}
    data["tracking"] = {"uri": uri, "checkpoint_every": 1}
    data["env"]["kwargs"] = TINY["env.kwargs"]
    data["model"] = {"hidden": [16]}
    data["training"] = {"train_batch_size": 100, "minibatch_size": 100, "num_epochs": 1}
    return validate_config(data)


def assert_every_iteration_once(history: dict[str, list[tuple[int, float]]], here: Path) -> None:
    """Each metric's MLflow history is the run folder's metrics.csv: same steps, same values."""
    local = read_metrics_csv(here / names.METRICS_CSV)
    for metric in (names.TEAM_RETURN, names.ENV_STEPS):
        assert history[metric] == local[metric], metric


@pytest.fixture(scope="module")
def train_run(server: MlflowServer, ray_local: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One 5-iteration run, two outages: the server stops after iteration 1 and is back (same port,
    same store) before iteration 4 ends; it stops again after iteration 4 and stays down, so the
    run ends with writes in its journal."""
    run_dir = tmp_path_factory.mktemp("train") / "runs"
    lines: list[str] = []
    before_second_outage: list[dict] = []
    cfg = train_config(run_dir, server.uri, 5)

    def echo(line: str) -> None:
        lines.append(line)
        if line.startswith("iter    1/"):
            server.stop()
        elif line.startswith("iter    2/"):
            server.launch()  # boots while iteration 3 trains (and logs to the journal)
        elif line.startswith("iter    3/"):
            server.wait_ready()
            wait_for(lambda: any(" is back; sent " in x for x in lines), 30, "the journal to drain")
        elif line.startswith("iter    4/"):
            mlflow = client(server.uri)
            (run,) = mlflow.search_runs([mlflow.get_experiment_by_name(cfg.name).experiment_id])
            before_second_outage.append(metric_history(mlflow, run.info.run_id))
            server.stop()

    try:
        summary = train(cfg, echo=echo)
        ended_ms = time.time() * 1000
        journal = sessions(run_dir)
    finally:
        server.start()  # the run is over: the server comes back for the flush
    return {
        "summary": summary,
        "lines": lines,
        "before_second_outage": before_second_outage[0],
        "run_dir": run_dir,
        "ended_ms": ended_ms,
        "journal": journal,
    }


@pytest.mark.ray
def test_a_train_run_outlives_a_server_restart(train_run: dict) -> None:
    lines = train_run["lines"]
    down = next(i for i, line in enumerate(lines) if "unreachable" in line)
    back = next(i for i, line in enumerate(lines) if " is back; " in line)
    assert lines[down - 1].startswith("iter    1/")  # iteration 2's write found the server gone
    assert lines[back - 1].startswith("iter    3/")  # sent while the run went on
    assert lines[back + 1].startswith("iter    4/")
    sent = int(lines[back].split(" is back; sent the ")[1].split()[0])
    assert sent >= 2  # iterations 2 and 3 (and their checkpoint tags) waited
    # what the server held while the run went on: every iteration so far, in order, once
    assert steps(train_run["before_second_outage"], names.ENV_STEPS) == [1, 2, 3, 4]


@pytest.mark.ray
def test_a_run_whose_server_never_comes_back_ends_and_is_flushed_later(
    server: MlflowServer, train_run: dict
) -> None:
    summary, lines, run_dir = train_run["summary"], train_run["lines"], train_run["run_dir"]
    assert summary.iterations == 5
    (folder,) = train_run["journal"]
    assert lines[-1].endswith(
        f"writes wait in {folder}; upload them with: orchestrl tracking flush {run_dir.resolve()}"
    )
    assert any("learning curve is drawn from metrics.csv" in line for line in lines)
    assert (Path(summary.run_path) / names.LEARNING_CURVE).is_file()

    flushed = CliRunner().invoke(app, ["tracking", "flush", str(run_dir)])
    assert flushed.exit_code == 0, flushed.output
    assert f"{folder}: sent " in flushed.output
    mlflow = client(server.uri)
    history = metric_history(mlflow, summary.run_id)
    assert steps(history, names.ENV_STEPS) == [1, 2, 3, 4, 5]  # every iteration, in order, once
    assert_every_iteration_once(history, Path(summary.run_path))
    run = mlflow.get_run(summary.run_id)
    assert run.info.status == "FINISHED" and run.data.tags[names.TAG_ITERATION] == "5"
    assert run.info.end_time <= train_run["ended_ms"]  # when the run ended, not when it was flushed
    artifacts = {a.path for a in mlflow.list_artifacts(run.info.run_id)}
    assert {"config.yaml", "learning_curve.png", "metrics.csv", "checkpoint"} <= artifacts
    again = CliRunner().invoke(app, ["tracking", "flush", str(run_dir)])
    assert again.exit_code == 0 and "nothing to flush" in again.output
    assert steps(metric_history(mlflow, summary.run_id), names.ENV_STEPS) == [1, 2, 3, 4, 5]
    assert not (run_dir / names.JOURNAL_DIR).exists()


class ServerOutage(Callback):
    """Stops the server at one trial result and starts it again at another: ``(stage, trial
    suffix, iteration)`` keys, the stage being the experiment's name."""

    def __init__(self, server: MlflowServer, stop_at: tuple, start_at: tuple, lines: list[str]) -> None:
        self.server, self.stop_at, self.start_at, self.lines = server, stop_at, start_at, lines

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles its run config; this one never resumes
        return {}

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        key = (trial.config["experiment"]["name"], trial.trial_id[-5:], result["training_iteration"])
        if key == self.stop_at:
            self.server.stop()
        elif key == self.start_at:
            restart(self.server, self.lines)


def children(mlflow: Any, experiment: str, parent_run_id: str) -> list[Any]:
    exp = mlflow.get_experiment_by_name(experiment).experiment_id
    found = mlflow.search_runs([exp], filter_string=f"tags.`{names.TAG_PARENT}` = '{parent_run_id}'")
    return sorted(found, key=lambda r: r.info.start_time)


def write_spec(tmp_path: Path, spec: dict[str, Any]) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.ray
def test_a_sweep_outlives_a_server_restart(server: MlflowServer, ray_local: Path, tmp_path: Path) -> None:
    spec = {
        "name": "outage_sweep",
        "base": str(REPO / "configs" / "mappo_simple_spread.yaml"),
        "overrides": {**TINY, "stop.iterations": 2, "tracking.uri": server.uri},
        "space": {"training.lr": {"grid": [0.001, 0.003]}},
        "trial_resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "max_concurrent": 1,
    }
    sweep = load_sweep(write_spec(tmp_path, spec), run_dir=str(tmp_path / "runs"))
    name = sweep.cfg.name
    lines: list[str] = []
    # trial 0 finishes and trial 1 starts (its child run is created) while the server is down
    outage = ServerOutage(server, (name, "00000", 1), (name, "00001", 1), lines)
    summary = run_sweep(sweep, Launch(echo=lines.append), callbacks=(outage,))
    assert not summary.interrupted and summary.best is not None
    mlflow = client(server.uri)
    parent = mlflow.get_run(summary.parent_run_id)
    assert parent.info.status == "FINISHED"
    runs = children(mlflow, "outage_sweep", summary.parent_run_id)
    assert len(runs) == 2 and {t.run_id for t in summary.trials} == {r.info.run_id for r in runs}
    for run in runs:
        assert run.info.status == "FINISHED"
        assert steps(metric_history(mlflow, run.info.run_id), names.TEAM_RETURN) == [1, 2]
    assert parent.data.tags[names.TAG_BEST_RUN] in {r.info.run_id for r in runs}
    parent_history = metric_history(mlflow, summary.parent_run_id)
    assert parent_history["trials_done"] == [(1, 1.0), (2, 2.0)]  # the first counted during the outage
    assert any("no learning curve" in line for line in lines)  # trial 0 ended during the outage


@pytest.mark.ray
def test_a_curriculum_outlives_a_server_restart(
    server: MlflowServer, ray_local: Path, tmp_path: Path
) -> None:
    spec = {
        "name": "outage_curriculum",
        "base": str(REPO / "configs" / "mappo_simple_spread.yaml"),
        "overrides": {**TINY, "tracking.uri": server.uri},
        "trial_resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "stages": [
            {"name": "n2", "promote": {"iterations": 1}},
            {"name": "n2b", "overrides": {"seed": 4}, "promote": {"iterations": 2}},
        ],
    }
    curriculum = load_curriculum(write_spec(tmp_path, spec), run_dir=str(tmp_path / "runs"))
    first, second = (cfg.name for _, cfg in curriculum.stages)
    lines: list[str] = []
    # stage 0 ends and stage 1 starts (its child run is created) while the server is down
    outage = ServerOutage(server, (first, "00000", 1), (second, "00000", 1), lines)
    summary = run_curriculum(curriculum, Launch(echo=lines.append), callbacks=(outage,))
    assert [s.iterations for s in summary.stages] == [1, 2]
    mlflow = client(server.uri)
    parent = mlflow.get_run(summary.parent_run_id)
    assert parent.info.status == "FINISHED"
    runs = children(mlflow, "outage_curriculum", summary.parent_run_id)
    assert [r.data.tags[names.TAG_STAGE] for r in runs] == ["n2", "n2b"]
    for i, run in enumerate(runs):
        assert run.info.status == "FINISHED"
        assert steps(metric_history(mlflow, run.info.run_id), names.TEAM_RETURN) == [1, 2][: i + 1]
        assert parent.data.tags[names.stage_tag(i, "run_id")] == run.info.run_id == summary.stages[i].run_id
    parent_history = metric_history(mlflow, summary.parent_run_id)
    assert parent_history[names.CURRICULUM_PREFIX + "stage"] == [(0, 0.0), (1, 1.0)]
    assert steps(parent_history, names.CURRICULUM_PREFIX + "stage_iterations") == [1, 3]
    assert any("carry report is in its run's tags" in line for line in lines)  # stage 0 ended offline
    assert json.loads(runs[1].data.tags[names.TAG_CARRY])  # stage 1's carry report arrived
