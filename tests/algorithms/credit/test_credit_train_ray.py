"""`orchestrl train` with a counterfactual estimator: curated credit metrics and the credit table
artifact in MLflow (starts a real local Ray)."""

from __future__ import annotations

from pathlib import Path

import pytest
from credit_helpers import ONE_AGENT_MATTERS, tiny

from orchestrl.experiment.config import validate_config
from orchestrl.tracking import store as tracking
from orchestrl.training.train import train

pytestmark = pytest.mark.ray


@pytest.mark.parametrize("algo", ["lemon"])
def test_train_logs_per_agent_credit_and_the_credit_table(algo: str, ray_local: Path, run_dir: Path) -> None:
    data = tiny(
        algo,
        kwargs={"payoff": ONE_AGENT_MATTERS},
        resources={"env_runners": 1, "cpus_per_env_runner": 1},
        stop={"iterations": 2},
        tracking={"checkpoint_every": 0},
    )
    data["run_dir"] = str(run_dir)
    summary = train(validate_config(data), echo=lambda _: None)
    client = tracking.client(tracking.default_tracking_uri(run_dir))
    history = tracking.metric_history(client, summary.run_id)
    for key in ("shared/credit/agent_0_share", "shared/credit/agent_1_mean_abs_delta", "env/cf_executions"):
        assert key in history, key
    assert history["shared/credit/agent_1_mean_abs_delta"][-1][1] == 0.0
    artifacts = {a.path for a in client.list_artifacts(summary.run_id, "env")}
    assert "env/credit_table.csv" in artifacts
    table = (Path(summary.run_path) / "artifacts" / "credit_table.csv").read_text().splitlines()
    assert table[0].startswith("module,agent,") and len(table) == 3
