"""The MLflow UI over a run dir's embedded store (or any tracking URI), on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from orchestrl.tracking.store import artifact_root, resolve_tracking_uri


def ui_command(run_dir: Path, port: int, tracking_uri: str | None = None) -> tuple[list[str], str]:
    """The ``mlflow server`` command line serving ``run_dir``'s store, and the store's URI.

    One server worker: the UI has one user on this machine, and MLflow's default of four workers,
    each importing MLflow, answers much later on a small machine than one does (with the job runner
    off, see ``serve_ui``)."""
    uri = resolve_tracking_uri(run_dir, tracking_uri)
    cmd = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", uri,
        "--default-artifact-root", artifact_root(run_dir),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    return cmd, uri


def ui_url(port: int) -> str:
    """The UI's address, opening on model training (MLflow 3's UI opens on GenAI unless told:
    the ``workflowType`` query parameter, else the browser's last choice)."""
    return f"http://127.0.0.1:{port}/#/experiments?workflowType=machine_learning"


def serve_ui(cmd: list[str]) -> int:
    """Runs the server in the foreground until it exits (Ctrl-C stops it); returns its exit code.
    MLflow's job runner (GenAI scorers and prompt optimisation, which orchestrl never submits) stays
    off unless the caller's environment turns it on: it is one more process to boot."""
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0
