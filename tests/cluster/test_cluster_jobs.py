"""Cluster job submission without a cluster: addresses, the tracking policy, the runtime env, the
entrypoint, path handling, and the CLI's one-line errors and exit codes."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from orchestrl.cluster import connection, errors, lifecycle, packaging, tracking_policy
from orchestrl.cluster.cli import SUBMIT_CONTEXT_SETTINGS, jobs_app, submit_command

ROOT = Path(__file__).resolve().parents[2]

# Prints what the job would see; stands in for the orchestrl CLI in entrypoint tests.
ECHO_LAUNCHER = "import os, sys; print(repr(sys.argv[1:])); print(os.getcwd())"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A minimal orchestrl project tree."""
    root = tmp_path / "proj"
    (root / "configs").mkdir(parents=True)
    (root / "runs").mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "orchestrl"\ndependencies = ["Ray[rllib,tune]==2.60.0", "torch>=2.13", '
        '"raylib-ish>=1", "mlflow==3.17.2"]\n'
    )
    (root / "configs" / "exp.yaml").write_text("name: exp\n")
    (root / "runs" / "old.yaml").write_text("name: old\n")
    return root


# ---------------------------------------------------------------------------------------------
# MLflow tracking


@pytest.mark.parametrize(
    "uri",
    [
        "",
        "sqlite:///runs/mlflow.db",
        "sqlite:////home/me/runs/mlflow.db",
        "file:///tmp/mlruns",
        "./mlruns",
        "/abs/mlruns",
        "C:\\mlruns",
    ],
)
def test_local_tracking_stores_are_refused_with_a_one_line_value_error(uri: str) -> None:
    with pytest.raises(ValueError, match="share no disk") as info:
        tracking_policy.require_remote_tracking(uri)
    assert isinstance(info.value, errors.LocalTrackingStoreError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "uri",
    ["http://mlflow.mlflow.svc:5000", "https://mlflow.example.org", "databricks", "postgresql://db/mlflow"],
)
def test_tracking_servers_and_shared_databases_are_accepted(uri: str) -> None:
    tracking_policy.require_remote_tracking(uri)


def test_tracking_uri_precedence_follows_the_cli(project: Path) -> None:
    (project / "configs" / "tracked.yaml").write_text("name: x\ntracking:\n  uri: http://from-config:5000\n")
    env = {"MLFLOW_TRACKING_URI": "http://from-env:5000"}
    find = tracking_policy.find_tracking_uri
    assert find(["train", "c.yaml"], {}, project).uri is None
    assert find(["train", "configs/exp.yaml"], env, project) == tracking_policy.TrackingChoice(
        "http://from-env:5000", "MLFLOW_TRACKING_URI"
    )
    assert find(["train", "configs/tracked.yaml"], env, project).uri == "http://from-config:5000"
    args = ["train", "configs/tracked.yaml", "-s", "tracking.uri=sqlite:///x.db"]
    assert find(args, env, project) == tracking_policy.TrackingChoice("sqlite:///x.db", "--set tracking.uri")
    args += ["--tracking-uri=http://flag:5000"]
    assert find(args, env, project) == tracking_policy.TrackingChoice("http://flag:5000", "--tracking-uri")


def test_a_remote_cluster_without_a_tracking_uri_is_refused_but_a_local_one_is_not() -> None:
    none = tracking_policy.TrackingChoice(None, "default")
    with pytest.raises(errors.LocalTrackingStoreError, match="embedded SQLite store"):
        tracking_policy.check_tracking_for_cluster(none, on_this_machine=False)
    tracking_policy.check_tracking_for_cluster(none, on_this_machine=True)
    sqlite = tracking_policy.TrackingChoice("sqlite:///runs/mlflow.db", "--tracking-uri")
    with pytest.raises(errors.LocalTrackingStoreError, match=r"\(URI from --tracking-uri\)"):
        tracking_policy.check_tracking_for_cluster(sqlite, on_this_machine=False)
    tracking_policy.check_tracking_for_cluster(sqlite, on_this_machine=True)


# ---------------------------------------------------------------------------------------------
# Addresses


def test_address_precedence_is_flag_then_ray_address_then_default() -> None:
    assert connection.resolve_address(None, {}) == connection.DEFAULT_ADDRESS == "http://127.0.0.1:8265"
    assert connection.resolve_address(None, {"RAY_ADDRESS": "http://head:8265/"}) == "http://head:8265"
    assert (
        connection.resolve_address("head2:8265", {"RAY_ADDRESS": "http://head:8265"}) == "http://head2:8265"
    )


@pytest.mark.parametrize("address", ["auto", "ray://head:10001", "ftp://head:8265"])
def test_non_jobs_api_addresses_are_refused(address: str) -> None:
    with pytest.raises(errors.SubmitRefusedError, match=r"address|URL"):
        connection.resolve_address(address, {})


def test_nothing_listening_is_reported_as_unreachable_quickly() -> None:
    port = closed_port()
    with pytest.raises(errors.ClusterUnreachableError, match=f"http://127.0.0.1:{port}") as info:
        connection.connect(f"127.0.0.1:{port}", timeout_s=2)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Runtime env and entrypoint


def test_requirements_come_from_pyproject_without_ray(project: Path) -> None:
    assert packaging.read_requirements(project / "pyproject.toml") == [
        "torch>=2.13",
        "raylib-ish>=1",
        "mlflow==3.17.2",
    ]


def test_the_real_pyproject_yields_requirements_with_torch_and_mlflow() -> None:
    names = [
        r.split(">")[0].split("=")[0].split("<")[0]
        for r in packaging.read_requirements(ROOT / "pyproject.toml")
    ]
    assert "torch" in names and "mlflow" in names and "ray" not in names


def test_uploaded_runtime_env_carries_project_requirements_and_excludes(project: Path) -> None:
    env = packaging.build_runtime_env(project, env_vars={"MLFLOW_TRACKING_URI": "http://m:5000"})
    assert env["working_dir"] == str(project)
    assert {".venv", "runs", ".git", "__pycache__", ".pytest_cache", ".ruff_cache"} <= set(env["excludes"])
    assert env["pip"] == {"packages": ["torch>=2.13", "raylib-ish>=1", "mlflow==3.17.2"], "pip_check": False}
    assert env["config"]["setup_timeout_seconds"] >= 600
    assert env["env_vars"] == {"MLFLOW_TRACKING_URI": "http://m:5000"}
    assert "pip" not in packaging.build_runtime_env(project, requirements=False)
    assert packaging.build_runtime_env(project, upload=False) == {}


def test_entrypoint_passes_every_argument_through_the_shell_intact(tmp_path: Path) -> None:
    args = ["train", "my config.yaml", "--set", 'name=it\'s "quoted"', "$HOME", "a;b"]
    entrypoint = packaging.build_entrypoint(args, python=sys.executable, cwd=tmp_path, launcher=ECHO_LAUNCHER)
    # Ray runs the entrypoint through a shell, as here.
    out = subprocess.run(entrypoint, shell=True, capture_output=True, text=True, check=True).stdout
    argv_line, cwd_line = out.splitlines()
    assert argv_line == repr(args)
    assert Path(cwd_line).resolve() == tmp_path.resolve()


def test_the_launcher_is_the_console_script_body() -> None:
    assert packaging.ORCHESTRL_LAUNCHER.startswith("import sys; from orchestrl.cli import main;")
    assert packaging.build_entrypoint(["train", "x.yaml"]).startswith("python -c ")


# ---------------------------------------------------------------------------------------------
# Paths and the whole plan


def test_paths_are_rebased_onto_the_project_root(project: Path) -> None:
    sub = project / "configs"
    rebased = packaging.rebase_paths(
        ["train", "exp.yaml", f"--config={sub / 'exp.yaml'}", "--run-dir", "../runs", "missing.yaml"],
        project,
        upload=True,
        cwd=sub,
    )
    assert rebased == [
        "train",
        "configs/exp.yaml",
        "--config=configs/exp.yaml",
        "--run-dir",
        "runs",
        "missing.yaml",
    ]


def test_an_upload_refuses_files_it_would_not_carry(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("name: x\n")
    with pytest.raises(errors.SubmitRefusedError, match="outside the project"):
        packaging.rebase_paths(["train", str(outside)], project, upload=True, cwd=project)
    with pytest.raises(errors.SubmitRefusedError, match="not uploaded"):
        packaging.rebase_paths(["train", "runs/old.yaml"], project, upload=True, cwd=project)
    # In place the job sees this machine's files, so both are fine.
    assert packaging.rebase_paths(["train", str(outside)], project, upload=False, cwd=project)[1] == str(
        outside.resolve()
    )
    assert (
        packaging.rebase_paths(["train", "runs/old.yaml"], project, upload=False, cwd=project)[1]
        == "runs/old.yaml"
    )


def test_remote_plan_uploads_and_forwards_the_tracking_uri(project: Path) -> None:
    plan = lifecycle.plan_submission(
        ["train", "configs/exp.yaml"],
        on_this_machine=False,
        project_dir=project,
        env={"MLFLOW_TRACKING_URI": "http://mlflow:5000"},
        cwd=project,
        submission_id="job-1",
    )
    assert not plan.in_place
    assert plan.entrypoint == packaging.build_entrypoint(["train", "configs/exp.yaml"])
    assert plan.runtime_env["working_dir"] == str(project)
    assert plan.runtime_env["env_vars"] == {"MLFLOW_TRACKING_URI": "http://mlflow:5000"}
    assert plan.metadata == {"orchestrl_args": "train configs/exp.yaml", "orchestrl_mode": "upload"}
    assert plan.submission_id == "job-1"
    assert plan.notes == ()


def test_remote_plan_notes_a_localhost_tracking_uri(project: Path) -> None:
    plan = lifecycle.plan_submission(
        ["train", "--tracking-uri", "http://127.0.0.1:5000"],
        on_this_machine=False,
        project_dir=project,
        env={},
    )
    assert "env_vars" not in plan.runtime_env  # the flag travels in the command line itself
    assert len(plan.notes) == 1 and "resolves on the cluster node" in plan.notes[0]


def test_local_plan_runs_in_place_with_this_interpreter(project: Path) -> None:
    plan = lifecycle.plan_submission(
        ["sweep", "configs/exp.yaml"], on_this_machine=True, project_dir=project, env={}
    )
    assert plan.in_place
    assert plan.entrypoint.startswith(f"cd {project.resolve()} && {sys.executable} -c ")
    assert "working_dir" not in plan.runtime_env and "pip" not in plan.runtime_env
    assert plan.submission_id.startswith("orchestrl-sweep-")


@pytest.mark.parametrize("args", [[], ["evaluate", "x"], ["--address", "y", "train"]])
def test_only_train_sweep_and_curriculum_are_submittable(args: list[str], project: Path) -> None:
    with pytest.raises(errors.SubmitRefusedError, match="train, sweep, curriculum"):
        lifecycle.plan_submission(args, on_this_machine=True, project_dir=project, env={})


def test_project_dir_is_found_from_a_subdirectory(project: Path) -> None:
    assert packaging.find_project_dir(project / "configs") == project.resolve()


# ---------------------------------------------------------------------------------------------
# Outcomes


def summary(status: str, exit_code: int | None, message: str = "") -> lifecycle.JobSummary:
    return lifecycle.JobSummary(
        "job-1", status, "orchestrl train x", datetime.now(UTC), None, message, exit_code
    )


def test_exit_codes_follow_the_jobs_outcome() -> None:
    assert lifecycle.exit_code(summary("SUCCEEDED", 0)) == 0
    assert lifecycle.exit_code(summary("FAILED", 3)) == 3
    assert lifecycle.exit_code(summary("FAILED", None, "runtime env setup failed")) == 1
    assert lifecycle.exit_code(summary("FAILED", -9)) == 1
    assert lifecycle.exit_code(summary("STOPPED", None)) == 1


def test_outcome_lines_are_single_lines_that_say_what_happened() -> None:
    assert lifecycle.outcome_line(summary("SUCCEEDED", 0)) == "job job-1 succeeded"
    failed = lifecycle.outcome_line(summary("FAILED", 3))
    assert failed.startswith("job job-1 failed with exit code 3") and "orchestrl jobs logs job-1" in failed
    assert "runtime env setup failed" in lifecycle.outcome_line(
        summary("FAILED", None, "runtime env setup failed")
    )
    assert lifecycle.outcome_line(summary("STOPPED", None)) == "job job-1 was stopped"


# ---------------------------------------------------------------------------------------------
# The CLI, mounted the way the lead's app mounts it


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command("submit", context_settings=SUBMIT_CONTEXT_SETTINGS)(submit_command)
    app.add_typer(jobs_app, name="jobs")
    return app


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0]


def test_cli_unreachable_address_is_one_line_and_exit_1(cli: typer.Typer) -> None:
    port = closed_port()
    runner = CliRunner()
    for argv in (
        ["submit", "--address", f"http://127.0.0.1:{port}", "--", "train", "x.yaml"],
        ["jobs", "list", "--address", f"http://127.0.0.1:{port}"],
        ["jobs", "logs", "some-job", "--address", f"http://127.0.0.1:{port}"],
        ["jobs", "stop", "some-job", "--address", f"http://127.0.0.1:{port}"],
    ):
        result = runner.invoke(cli, argv)
        assert result.exit_code == 1, (argv, result.output)
        assert_one_line_error(result.stderr, "cannot reach the Ray Jobs API", str(port))


def test_cli_reads_ray_address_from_the_environment(cli: typer.Typer) -> None:
    port = closed_port()
    result = CliRunner().invoke(cli, ["jobs", "list"], env={"RAY_ADDRESS": f"127.0.0.1:{port}"})
    assert result.exit_code == 1
    assert_one_line_error(result.stderr, f"http://127.0.0.1:{port}")


def test_cli_refuses_other_commands_with_exit_2(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["submit", "--address", "http://127.0.0.1:1", "--", "ui"])
    assert result.exit_code == 2
    assert_one_line_error(result.stderr, "'ui' cannot run as a cluster job")


def test_cli_submit_takes_the_commands_options_without_a_double_dash(cli: typer.Typer) -> None:
    port = closed_port()
    argv = ["submit", "--address", f"http://127.0.0.1:{port}", "train", "x.yaml", "--set", "training.lr=1"]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 1  # parsed fine: it got as far as connecting
    assert_one_line_error(result.stderr, "cannot reach")


def test_cli_help_lists_the_three_job_commands(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["jobs", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for command in ("list", "logs", "stop"):
        assert command in result.stdout


# ---------------------------------------------------------------------------------------------
# Where the cluster is, and who may talk to it


class FakeNode:
    def __init__(self, ip: str, state: str = "ALIVE") -> None:
        self.node_ip, self.state = ip, state


def test_a_tunnelled_remote_cluster_is_not_mistaken_for_a_local_one(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray.util.state

    local_ip = next(ip for ip in connection.local_ips() if ip not in ("127.0.0.1", "::1"))
    cases = {
        (local_ip,): True,
        (local_ip, "10.7.0.12"): False,  # a head here with a worker elsewhere shares no disk either
        ("10.7.0.11",): False,  # what `ray dashboard` or a port-forward to 127.0.0.1 reaches
    }
    for ips, expected in cases.items():
        nodes = [FakeNode(ip) for ip in ips] + [FakeNode("10.9.9.9", state="DEAD")]
        monkeypatch.setattr(ray.util.state, "list_nodes", lambda nodes=nodes, **_: nodes)
        assert connection.cluster_on_this_machine("http://127.0.0.1:8265") is expected, ips

    def broken(**_: object) -> list[FakeNode]:
        raise RuntimeError("state API unavailable")

    monkeypatch.setattr(ray.util.state, "list_nodes", broken)
    assert connection.cluster_on_this_machine("http://127.0.0.1:8265") is False


def test_a_cluster_that_refuses_our_token_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray.job_submission
    from ray.exceptions import AuthenticationError

    def refuse(address: str) -> None:
        raise AuthenticationError("Authentication failed: Unauthorized: Missing authentication token\nmore")

    monkeypatch.setattr(ray.job_submission, "JobSubmissionClient", refuse)
    with socket.socket() as listener:  # something listening, so the reachability probe passes
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(errors.ClusterUnreachableError, match="RAY_AUTH_MODE=token") as info:
            connection.connect(url)
    assert "\n" not in str(info.value) and "Missing authentication token" in str(info.value)
