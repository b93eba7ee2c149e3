"""orchestrl on a real Ray cluster of several nodes on this machine, with a real MLflow server.

A head (0 CPUs, like the cluster YAMLs' head: it runs job drivers and the learner but no env
runner) and two worker nodes of 1 logical CPU each are started with ``ray start``; an
``mlflow server`` runs on 127.0.0.1 with a SQLite backend and proxied artifacts. Training is
submitted through the Jobs API exactly as a user would (``orchestrl submit``), and checked for:

- env runners placed on both worker nodes, metrics and artifacts on the MLflow server;
- fault tolerance: an env runner killed mid-training is restarted, then a whole worker node is
  killed; training finishes with every checkpoint; a driver killed mid-run is resumed with
  ``orchestrl train --resume RUN_ID`` from its last checkpoint;
- autoscaling with Ray's fake multi-node provider: a job needing CPUs the head lacks gets worker
  nodes launched for it, and they are removed once idle.

Every test starts its own servers and checks that none of their processes outlive it. Nothing
here runs ``ray stop``: see ``multinode.py``. The file took 4 min 4 s on the shared 2-core
development machine at a load average of 8-11 from other jobs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from multinode import (
    LocalCluster,
    MlflowServer,
    fake_autoscaling_config,
    new_root,
    remove_tree,
    running,
    wait_for,
)
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.cluster import connection, lifecycle
from orchestrl.tracking import names
from orchestrl.tracking import store as tracking

pytestmark = [pytest.mark.ray, pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
BATCH = 200
"""Env steps per training iteration of the tiny experiments below."""
JOB_TIMEOUT_S = 240


def tiny_experiment(name: str, run_dir: Path, iterations: int, runners: int = 2) -> dict[str, Any]:
    """A few seconds per iteration on a loaded machine; one env runner per worker node."""
    return {
        "name": name,
        "seed": 1,
        "run_dir": str(run_dir),
        "env": {"name": "simple_spread", "kwargs": {"N": 2, "max_cycles": 10}},
        "algorithm": {"name": "mappo"},
        "model": {"hidden": [16]},
        "resources": {"env_runners": runners, "envs_per_env_runner": 1, "cpus_per_env_runner": 1},
        "training": {"train_batch_size": BATCH, "minibatch_size": 100, "num_epochs": 1},
        "stop": {"iterations": iterations},
        "tracking": {"checkpoint_every": 1},
    }


def write_config(directory: Path, experiment: dict[str, Any]) -> Path:
    path = directory / f"{experiment['name']}.yaml"
    path.write_text(yaml.safe_dump(experiment))
    return path


def require_dashboard() -> None:
    from ray._private.utils import get_dashboard_dependency_error

    missing = get_dashboard_dependency_error()
    if missing is not None:
        pytest.skip(f"the Ray dashboard (Jobs API) cannot start: {missing}; install ray[default]")


def ray_job_id(address: str, submission_id: str) -> str:
    """The Ray job id (what actors carry) of a submitted job."""
    return connection.connect(address).get_job_info(submission_id).job_id


def env_runners(address: str, submission_id: str) -> list[Any]:
    """The job's env-runner actors, alive or dead, with the node each runs (or ran) on."""
    from ray.util.state import list_actors

    job_id = ray_job_id(address, submission_id)
    actors = list_actors(
        address=address,
        filters=[("class_name", "=", "MultiAgentEnvRunner"), ("job_id", "=", job_id)],
        detail=True,
        raise_on_missing_output=False,
    )
    return sorted(actors, key=lambda a: a.actor_id)


def wait_job(address: str, submission_id: str, timeout_s: float = JOB_TIMEOUT_S) -> lifecycle.JobSummary:
    """Waits until the job ends and returns its final state."""
    return wait_for(
        lambda: (s := lifecycle.job_status(submission_id, address)).terminal and s,
        timeout_s,
        f"job {submission_id} to end",
        poll_s=1,
    )


def mlflow_run(client: Any, experiment: str) -> Any | None:
    """The one run of ``experiment`` on the server (None before the job has created it)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return None
    runs = client.search_runs([found.experiment_id])
    assert len(runs) <= 1, [r.info.run_id for r in runs]
    return runs[0] if runs else None


def wait_checkpoint(client: Any, experiment: str, iteration: int, address: str, submission_id: str) -> Any:
    """Waits until the run has checkpointed iteration ``iteration`` (or later); fails at once if the
    job ends first. Returns the run."""

    def checkpointed() -> Any:
        run = mlflow_run(client, experiment)
        if run is not None and int(run.data.tags.get(names.TAG_ITERATION, "0")) >= iteration:
            return run
        summary = lifecycle.job_status(submission_id, address)
        assert not summary.terminal, (
            f"job ended early ({summary.status}):\n{lifecycle.logs(submission_id, address)}"
        )
        return None

    return wait_for(
        checkpointed, JOB_TIMEOUT_S, f"{experiment} to checkpoint iteration {iteration}", poll_s=0.3
    )


def steps_of(client: Any, run_id: str, metric: str) -> list[int]:
    return [step for step, _ in tracking.metric_history(client, run_id)[metric]]


def checkpoint_dirs(run_path: Path) -> list[str]:
    """Checkpoints on disk that RLlib could restore (a complete save has both files)."""
    return sorted(
        p.name
        for p in (run_path / "checkpoints").glob("iter_*")
        if (p / "rllib_checkpoint.json").is_file() and (p / "learner_group").is_dir()
    )


def assert_all_gone(pids: set[int], what: str) -> None:
    survivors = sorted(pid for pid in pids if running(pid))
    assert not survivors, f"{what} processes survived teardown: {survivors}"


@dataclass
class Stack:
    """A running local cluster and MLflow server."""

    cluster: LocalCluster
    server: MlflowServer


class TestStaticCluster:
    """Head + two worker nodes + an MLflow server, shared by the tests of this class."""

    @pytest.fixture(scope="class")
    def stack(self) -> Iterator[Stack]:
        require_dashboard()
        cluster = LocalCluster(new_root("orl-mn-"))
        server = MlflowServer(new_root("orl-mlf-"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HOME", str(cluster.home))  # this process stays out of the real ~/.ray too
            patch.delenv("RAY_ADDRESS", raising=False)
            patch.delenv("MLFLOW_TRACKING_URI", raising=False)
            try:
                server.launch()  # boots while the cluster starts
                cluster.start()
                cluster.ensure_workers(2)
                server.wait_ready()
                yield Stack(cluster, server)
            finally:
                ended = cluster.shutdown() | server.stop()
                left = cluster.processes() | server.processes()
                remove_tree(cluster.root)
                remove_tree(server.root)
                assert not left, f"processes survived teardown: {sorted(p.pid for p in left)}"
                assert_all_gone(ended, "cluster or MLflow server")

    @pytest.fixture
    def cluster(self, stack: Stack) -> LocalCluster:
        """The cluster with two live worker nodes (a node an earlier test killed is replaced)."""
        stack.cluster.ensure_workers(2)
        return stack.cluster

    @pytest.fixture
    def mlflow(self, stack: Stack) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=stack.server.uri)

    def test_submitted_training_spreads_env_runners_over_the_workers_and_logs_to_the_server(
        self, cluster: LocalCluster, stack: Stack, mlflow: Any, tmp_path: Path
    ) -> None:
        config = write_config(tmp_path, tiny_experiment("mn_placement", tmp_path / "runs", iterations=3))
        argv = ["submit", "--address", cluster.address, "--project-dir", str(ROOT), "--follow", "--"]
        argv += ["train", str(config), "--tracking-uri", stack.server.uri]
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith("submitted orchestrl-train-")
        assert "iter    3/3" in result.stdout
        submission_id = result.stdout.split()[1]

        runners = env_runners(cluster.address, submission_id)
        assert len(runners) == 2
        worker_ids = {node.node_id for node in cluster.workers.values()}
        assert {a.node_id for a in runners} == worker_ids  # one on each worker, none on the head

        run = mlflow_run(mlflow, "mn_placement")
        assert run is not None and run.info.status == "FINISHED"
        assert run.info.run_id in result.stdout
        history = tracking.metric_history(mlflow, run.info.run_id)
        assert [s for s, _ in history["team_return_sum_mean"]] == [1, 2, 3]
        assert {"env_steps_per_s", "shared/policy_loss", "shared/vf_explained_var"} <= set(history)
        assert history["env_steps"][-1][1] >= 3 * BATCH
        artifacts = {a.path for a in mlflow.list_artifacts(run.info.run_id)}
        assert {"config.yaml", "metrics.csv", "learning_curve.png", "checkpoint"} <= artifacts
        # Proxied artifacts: the files went through the server into its own store.
        assert list((stack.server.root / "artifacts").rglob("learning_curve.png"))

    def test_training_survives_a_crashed_env_runner_then_a_lost_worker_node(
        self, cluster: LocalCluster, stack: Stack, mlflow: Any, tmp_path: Path
    ) -> None:
        # Stopped by time, not by iterations: however fast this machine is, training is still
        # running when the faults land, and keeps running for a while after the last one. The
        # budget leaves room for the faults to land late when the other test tiers load the machine.
        run_dir = tmp_path / "runs"
        experiment = tiny_experiment("mn_faults", run_dir, iterations=100_000)
        experiment["stop"]["time_s"] = 90
        plan = lifecycle.submit(
            ["train", str(write_config(tmp_path, experiment)), "--tracking-uri", stack.server.uri],
            address=cluster.address,
            project_dir=ROOT,
            env={},
        )
        sid = plan.submission_id
        wait_checkpoint(mlflow, "mn_faults", 2, cluster.address, sid)

        # 1. An env runner's process dies (say, OOM-killed): Ray restarts the actor in place.
        crashed, other = (a for a in env_runners(cluster.address, sid) if a.state == "ALIVE")
        os.kill(crashed.pid, signal.SIGKILL)

        def restarted() -> Any:
            return next(
                (
                    a
                    for a in env_runners(cluster.address, sid)
                    if a.actor_id == crashed.actor_id and a.state == "ALIVE" and a.pid != crashed.pid
                ),
                None,
            )

        assert wait_for(restarted, 90, "the crashed env runner to be restarted").num_restarts >= 1
        run = mlflow_run(mlflow, "mn_faults")
        wait_checkpoint(
            mlflow, "mn_faults", int(run.data.tags[names.TAG_ITERATION]) + 2, cluster.address, sid
        )

        # 2. The worker node of the other runner vanishes (a reclaimed spot VM). Its runner cannot
        # come back (no free CPU is left anywhere), so from here on only the restarted runner samples.
        lost = next(name for name, node in cluster.workers.items() if node.node_id == other.node_id)
        lost_node_id = cluster.workers[lost].node_id
        cluster.kill_worker(lost)
        at_loss = int(mlflow_run(mlflow, "mn_faults").data.tags[names.TAG_ITERATION])

        summary = wait_job(cluster.address, sid)
        assert summary.status == "SUCCEEDED", lifecycle.logs(sid, cluster.address)
        assert any(n.node_id == lost_node_id and n.state == "DEAD" for n in cluster.nodes())

        run = mlflow_run(mlflow, "mn_faults")
        assert run.info.status == "FINISHED"
        last = int(run.data.tags[names.TAG_ITERATION])
        assert last > at_loss + 1
        env_steps = dict(tracking.metric_history(mlflow, run.info.run_id)["env_steps"])
        assert sorted(env_steps) == list(range(1, last + 1))  # every iteration logged once
        assert all(env_steps[i + 1] >= env_steps[i] for i in range(1, last))
        # Samples after the node loss can only come from the restarted runner: it is back in
        # service. (The iteration in which the only healthy runner dies may come back empty:
        # RLlib's PPO returns early when no runner delivered; the next iteration samples again.)
        assert env_steps[last] >= env_steps[at_loss] + BATCH
        run_path = run_dir / "experiments" / "mn_faults" / run.info.run_id
        assert checkpoint_dirs(run_path) == [f"iter_{i:06d}" for i in range(1, last + 1)]
        assert run.data.tags[names.TAG_CHECKPOINT] == str(run_path / "checkpoints" / f"iter_{last:06d}")

    def test_a_killed_driver_resumes_from_its_last_checkpoint(
        self, cluster: LocalCluster, stack: Stack, mlflow: Any, tmp_path: Path
    ) -> None:
        run_dir = tmp_path / "runs"
        config = write_config(tmp_path, tiny_experiment("mn_resume", run_dir, iterations=100_000))
        first = lifecycle.submit(
            ["train", str(config), "--tracking-uri", stack.server.uri],
            address=cluster.address,
            project_dir=ROOT,
            env={},
        )
        run = wait_checkpoint(mlflow, "mn_resume", 2, cluster.address, first.submission_id)
        run_id = run.info.run_id
        stopped = lifecycle.stop(first.submission_id, address=cluster.address, wait_s=30)
        assert stopped.job.status == "STOPPED"
        wait_for(
            lambda: all(a.state == "DEAD" for a in env_runners(cluster.address, first.submission_id)),
            30,
            "the stopped driver's env runners to go",
        )
        checkpointed = int(mlflow.get_run(run_id).data.tags[names.TAG_ITERATION])
        target = checkpointed + 2

        argv = ["train", "--resume", run_id, "--stop-iters", str(target)]
        argv += ["--tracking-uri", stack.server.uri, "--run-dir", str(run_dir)]
        second = lifecycle.submit(argv, address=cluster.address, project_dir=ROOT, env={})
        summary = wait_job(cluster.address, second.submission_id)
        logs = lifecycle.logs(second.submission_id, cluster.address)
        assert summary.status == "SUCCEEDED", logs

        iteration_lines = [line.split() for line in logs.splitlines() if line.startswith("iter ")]
        assert [words[1] for words in iteration_lines] == [
            f"{checkpointed + 1}/{target}",
            f"{target}/{target}",
        ]
        resumed = mlflow.get_run(run_id)
        assert resumed.info.status == "FINISHED"
        assert resumed.data.tags[names.TAG_ITERATION] == str(target)
        assert set(steps_of(mlflow, run_id, "team_return_sum_mean")) == set(range(1, target + 1))
        env_steps = dict(tracking.metric_history(mlflow, run_id)["env_steps"])
        assert env_steps[target] >= target * BATCH  # counters came back with the checkpoint


def test_the_autoscaler_adds_worker_nodes_for_a_job_and_removes_them_when_idle(tmp_path: Path) -> None:
    require_dashboard()
    autoscaling = fake_autoscaling_config(
        {"cpu_env_runner": {"resources": {"CPU": 1}, "min_workers": 0, "max_workers": 2}},
        idle_timeout_minutes=0.1,
        max_workers=2,
    )
    cluster = LocalCluster(new_root("orl-as-"), head_cpus=0, autoscaling_config=autoscaling)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(cluster.home))
        patch.delenv("RAY_ADDRESS", raising=False)
        try:
            cluster.start()
            (head,) = cluster.alive_nodes()
            assert head.is_head_node and head.resources_total.get("CPU", 0) == 0

            # Two env runners of 1 CPU each: twice what the head has (none). The embedded SQLite
            # store is fine: in place, the job shares this machine's disk.
            experiment = tiny_experiment("mn_autoscale", tmp_path / "runs", iterations=1)
            experiment["tracking"] = {"checkpoint_every": 0, "log_artifacts": False}
            plan = lifecycle.submit(
                ["train", str(write_config(tmp_path, experiment))],
                address=cluster.address,
                project_dir=ROOT,
                env={},
            )
            summary = wait_job(cluster.address, plan.submission_id)
            assert summary.status == "SUCCEEDED", lifecycle.logs(plan.submission_id, cluster.address)

            launched = [n for n in cluster.nodes() if not n.is_head_node]
            assert len(launched) == 2
            assert all(n.resources_total.get("CPU") == 1 for n in launched)
            runners = env_runners(cluster.address, plan.submission_id)
            launched_ids = {n.node_id for n in launched}
            assert {a.node_id for a in runners} == launched_ids

            wait_for(lambda: len(cluster.alive_nodes()) == 1, 120, "idle worker nodes to be removed")
            # ... by the autoscaler, because they were idle (not because they crashed):
            monitor_log = cluster.head_temp_dir / "session_latest" / "logs" / "monitor.log"
            idle = re.compile(r"Terminating the node with id (\w+) .*\(idle\)")
            assert wait_for(
                lambda: {m.group(1) for m in idle.finditer(monitor_log.read_text())} >= launched_ids,
                30,
                "the autoscaler's log to name both idle nodes",
            )
        finally:
            ended = cluster.shutdown()
            left = cluster.processes()
            remove_tree(cluster.root)
            assert not left, f"processes survived teardown: {sorted(p.pid for p in left)}"
            assert_all_gone(ended, "autoscaling cluster")


def test_teardown_finds_a_directory_s_processes_and_their_children_and_nothing_else(tmp_path: Path) -> None:
    # Guards the "nothing left" checks above: the search must find what it should (a process
    # naming the directory, and its child, which does not) and nothing else (a sibling directory
    # whose name merely starts the same).
    from multinode import end_processes, processes_under

    ours, other = tmp_path / "node", tmp_path / "node-other"
    spawn_child = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    parent = subprocess.Popen([sys.executable, "-c", spawn_child, str(ours)])
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(other)])
    try:

        def both() -> set | None:
            found = processes_under(ours)
            return found if len(found) == 2 else None

        found = wait_for(both, 20, "the process and its child")
        assert parent.pid in {p.pid for p in found}
        assert bystander.pid not in {p.pid for p in found}
        ended = end_processes(lambda: processes_under(ours))
        parent.wait(timeout=10)
        assert ended == {p.pid for p in found}
        assert processes_under(ours) == set()
        assert_all_gone(ended, "test")
        assert bystander.poll() is None  # untouched
    finally:
        for proc in (parent, bystander):
            proc.kill()
            proc.wait(timeout=10)
