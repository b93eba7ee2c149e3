"""Cluster jobs against a real Ray head started with `ray start`, as a user would, in a temp dir.

The head runs with its dashboard (the Jobs API) on 127.0.0.1, one CPU, HOME pointed at a temp
dir (Ray writes ~/.ray there) and every file under one temp dir. Teardown ends exactly the
processes of that head, found by the temp dir in their command line or environment plus their
descendants (``multinode.processes_under``), and checks none is left. It deliberately does not
run `ray stop --force`: that kills every Ray process of the user on the machine, including other
test sessions' clusters.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from multinode import end_processes, free_port, processes_under, running
from typer.testing import CliRunner

from orchestrl.cluster import connection, errors, lifecycle
from orchestrl.cluster.cli import SUBMIT_CONTEXT_SETTINGS, jobs_app, submit_command

pytestmark = [pytest.mark.ray, pytest.mark.cluster, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the orchestrl CLI: shows what the job saw.
PROBE_LAUNCHER = (
    "import os, sys, pathlib; print('ARGS', sys.argv[1:]); print('CWD', os.getcwd()); "
    "print('MARKER', pathlib.Path('marker.txt').read_text().strip()); "
    "print('RUNS', pathlib.Path('runs/big.bin').exists()); "
    "print('TRACKING', os.environ.get('MLFLOW_TRACKING_URI'))"
)


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """The Jobs API URL of a fresh single-node Ray head."""
    from ray._private.utils import get_dashboard_dependency_error

    missing = get_dashboard_dependency_error()
    if missing is not None:
        pytest.skip(f"the Ray dashboard (Jobs API) cannot start: {missing}; install ray[default]")
    root = Path(tempfile.mkdtemp(prefix="orl-jobs-"))  # short: Ray's socket paths must stay < 108 chars
    home, temp_dir, tmp = root / "home", root / "ray", root / "tmp"
    home.mkdir()
    tmp.mkdir()
    gcs_port, dashboard_port, agent_port = free_port(), free_port(), free_port()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    command = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        "--head",
        f"--port={gcs_port}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard_port}",
        f"--dashboard-agent-listen-port={agent_port}",
        f"--temp-dir={temp_dir}",
        "--num-cpus=1",
        "--object-store-memory=200000000",
        "--include-dashboard=true",
        "--disable-usage-stats",
    ]
    address = f"http://127.0.0.1:{dashboard_port}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))  # the client side stays out of the real ~/.ray too
        patch.delenv("RAY_ADDRESS", raising=False)
        try:
            started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
            if started.returncode != 0:
                pytest.fail(f"ray start failed ({started.returncode}): {started.stderr[-2000:]}")
            deadline = time.monotonic() + 30
            while True:
                try:
                    connection.connect(address, timeout_s=2)
                    break
                except errors.ClusterUnreachableError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            yield address
        finally:
            ended = end_processes(lambda: processes_under(root))
            assert not processes_under(root), "Ray processes survived teardown"
            assert not any(running(pid) for pid in ended)
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "runs").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "orchestrl"\ndependencies = ["ray==2.60.0"]\n')
    (root / "marker.txt").write_text("from-the-project\n")
    (root / "runs" / "big.bin").write_bytes(b"\0" * 1024)
    return root


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command("submit", context_settings=SUBMIT_CONTEXT_SETTINGS)(submit_command)
    app.add_typer(jobs_app, name="jobs")
    return app


def followed(job_id: str, address: str) -> tuple[lifecycle.JobSummary, str]:
    out = io.StringIO()
    return lifecycle.follow(job_id, address=address, out=out, poll_s=0.3), out.getvalue()


def test_a_cluster_on_this_machine_is_recognised(ray_head: str) -> None:
    assert connection.cluster_on_this_machine(ray_head)


def test_in_place_job_runs_in_the_project_with_its_arguments(ray_head: str, project: Path) -> None:
    args = ["train", "exp.yaml", "--set", "name=it's a test"]
    plan = lifecycle.submit(args, address=ray_head, project_dir=project, env={}, launcher=PROBE_LAUNCHER)
    assert plan.in_place
    summary, logs = followed(plan.submission_id, ray_head)
    assert summary.status == "SUCCEEDED" and lifecycle.exit_code(summary) == 0, logs
    assert f"ARGS {args!r}" in logs
    assert f"CWD {project.resolve()}" in logs
    assert "MARKER from-the-project" in logs and "RUNS True" in logs  # the real directory
    assert summary.command == "orchestrl train exp.yaml --set 'name=it'\"'\"'s a test'"


def test_uploaded_job_gets_a_copy_of_the_project_without_runs(ray_head: str, project: Path) -> None:
    env = {"MLFLOW_TRACKING_URI": "http://mlflow.example:5000"}
    plan = lifecycle.submit(
        ["train", "exp.yaml"],
        address=ray_head,
        project_dir=project,
        requirements=False,  # the pip path is Ray's; installing here would need the network
        in_place=False,
        env=env,
        launcher=PROBE_LAUNCHER,
    )
    assert not plan.in_place and plan.runtime_env["working_dir"] == str(project)
    summary, logs = followed(plan.submission_id, ray_head)
    assert summary.status == "SUCCEEDED", logs
    assert "MARKER from-the-project" in logs
    assert f"CWD {project.resolve()}" not in logs  # a copy, unpacked by Ray
    assert "RUNS False" in logs  # excluded from the upload
    assert "TRACKING http://mlflow.example:5000" in logs


def test_remote_submission_with_a_local_store_is_refused_before_sending(ray_head: str, project: Path) -> None:
    before = {j.job_id for j in lifecycle.list_jobs(ray_head)}
    with pytest.raises(errors.LocalTrackingStoreError, match="share no disk"):
        lifecycle.submit(
            ["train", "--tracking-uri", "sqlite:///runs/mlflow.db"],
            address=ray_head,
            project_dir=project,
            in_place=False,
            env={},
        )
    with pytest.raises(errors.LocalTrackingStoreError, match="embedded SQLite store"):
        lifecycle.submit(["train"], address=ray_head, project_dir=project, in_place=False, env={})
    assert {j.job_id for j in lifecycle.list_jobs(ray_head)} == before


def test_a_failing_job_gives_its_exit_code_and_one_error_line(ray_head: str, cli: typer.Typer) -> None:
    job_id = lifecycle.submit_entrypoint(
        "python -c \"import sys; print('boom'); sys.exit(3)\"", address=ray_head, submission_id="fails-with-3"
    )
    result = CliRunner().invoke(cli, ["jobs", "logs", job_id, "--follow", "--address", ray_head])
    assert result.exit_code == 3, result.output
    assert "boom" in result.stdout
    error_lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert error_lines == [
        f"error: job {job_id} failed with exit code 3 (logs: orchestrl jobs logs {job_id})"
    ]
    assert lifecycle.job_status(job_id, ray_head).status == "FAILED"
    plain = CliRunner().invoke(cli, ["jobs", "logs", job_id, "--address", ray_head])
    assert plain.exit_code == 0 and "boom" in plain.stdout


def test_following_survives_a_dropped_log_stream(ray_head: str, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = lifecycle.submit_entrypoint(
        "python -c \"print('line one'); print('line two')\"", address=ray_head
    )
    complete = followed(job_id, ray_head)[1]
    assert "line one" in complete and "line two" in complete

    async def drops_after_a_few_characters(
        client: object, job_id: str, out: io.StringIO, written: list[int]
    ) -> None:
        out.write(complete[:7])
        written[0] += 7
        raise ConnectionResetError("websocket closed")

    monkeypatch.setattr(lifecycle, "tail_logs", drops_after_a_few_characters)
    summary, logs = followed(job_id, ray_head)
    assert summary.status == "SUCCEEDED"
    assert logs == complete  # the polled rest joins the streamed start, nothing twice


def test_submit_follow_of_a_failing_orchestrl_command_fails_the_cli(ray_head: str, cli: typer.Typer) -> None:
    argv = ["submit", "--address", ray_head, "--project-dir", str(ROOT), "--follow"]
    argv += ["--", "train", "--no-such-option"]
    result = CliRunner().invoke(cli, argv)
    assert result.stdout.startswith("submitted orchestrl-train-")
    job_id = result.stdout.split()[1]
    summary = lifecycle.job_status(job_id, ray_head)
    assert summary.status == "FAILED"
    assert result.exit_code == lifecycle.exit_code(summary) != 0
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1 and f"job {job_id} failed" in error_lines[0]


def test_jobs_are_listed_and_stopped(ray_head: str, cli: typer.Typer) -> None:
    runner = CliRunner()
    job_id = lifecycle.submit_entrypoint(
        "python -c \"import time; print('sleeping', flush=True); time.sleep(120)\"",
        address=ray_head,
        submission_id="sleeper",
    )
    deadline = time.monotonic() + 30
    while lifecycle.job_status(job_id, ray_head).status != "RUNNING":
        assert time.monotonic() < deadline, "job never started"
        time.sleep(0.3)
    listed = runner.invoke(cli, ["jobs", "list", "--address", ray_head])
    assert listed.exit_code == 0
    header, *lines = listed.stdout.splitlines()
    assert header.split()[:3] == ["JOB", "ID", "STATUS"]
    rows = {line.split()[0]: line.split()[1] for line in lines}
    assert rows["sleeper"] == "RUNNING"
    assert set(rows.values()) <= {"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"}

    stopped = runner.invoke(cli, ["jobs", "stop", job_id, "--wait", "30", "--address", ray_head])
    assert stopped.exit_code == 0 and stopped.stdout.strip() == f"job {job_id} stopped (STOPPED)"
    summary = lifecycle.job_status(job_id, ray_head)
    assert summary.status == "STOPPED" and lifecycle.exit_code(summary) == 1
    again = runner.invoke(cli, ["jobs", "stop", job_id, "--address", ray_head])
    assert again.stdout.strip() == f"job {job_id} had already ended: STOPPED"

    unknown = runner.invoke(cli, ["jobs", "logs", "no-such-job", "--address", ray_head])
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == f"error: no job 'no-such-job' on the cluster at {ray_head}"


def test_dry_run_shows_the_job_and_sends_nothing(ray_head: str, cli: typer.Typer) -> None:
    before = {j.job_id for j in lifecycle.list_jobs(ray_head)}
    argv = ["submit", "--address", ray_head, "--project-dir", str(ROOT), "--dry-run", "--", "train", "x.yaml"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    first, entrypoint, runtime_env, tracking = result.stdout.splitlines()
    assert first.startswith("would submit orchestrl-train-") and first.endswith(f"(in place in {ROOT})")
    assert entrypoint.split(":", 1)[1].strip().startswith(f"cd {ROOT} && ")
    assert runtime_env.split(":", 1)[1].strip() == "{}"
    assert "(embedded store)" in tracking
    assert {j.job_id for j in lifecycle.list_jobs(ray_head)} == before
