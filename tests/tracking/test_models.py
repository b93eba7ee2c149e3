"""MLflow, the training way: experiments open on model training, the final policy as a pyfunc
model that loads the RLModule and acts (logged, registered, loaded back), and `orchestrl runs show`."""

from __future__ import annotations

import os
from typing import Any

import mlflow
import pandas as pd
from deploy_helpers import tiny
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import TrainedPolicy, to_json
from orchestrl.tracking import names
from orchestrl.tracking.models import log_policy_model, tracking_uri


def test_experiments_are_marked_as_model_training(runs: dict[str, Any]) -> None:
    experiment = runs["store"].client.get_experiment_by_name("tiny_ippo")
    assert experiment.tags[names.TAG_EXPERIMENT_KIND] == "custom_model_development"


def test_the_logged_policy_model_loads_and_acts_on_an_env_observation(runs: dict[str, Any]) -> None:
    (checkpoint, run_id), store = runs["spread"], runs["store"]
    ppo = build_ppo_config(validate_config(tiny("ippo")))
    policy = TrainedPolicy.from_checkpoint(checkpoint, ppo)
    exported = os.environ.get("MLFLOW_TRACKING_URI")
    uri = log_policy_model(store, run_id, policy.save(checkpoint.parent.parent / names.POLICY_DIR))
    assert store.run(run_id).tags[names.TAG_MODEL] == uri
    logged = store.client.get_logged_model(uri.removeprefix("models:/"))
    assert logged.experiment_id == store.client.get_run(run_id).info.experiment_id
    assert logged.artifact_location.startswith((runs["run_dir"] / "mlartifacts").as_uri())  # not ./mlruns
    assert os.environ.get("MLFLOW_TRACKING_URI") == exported  # MLflow's global URI put back

    env = ppo.env(ppo.env_config)
    observations = [env.reset(seed=seed)[0] for seed in (3, 4)]
    env.close()
    expected = [to_json(policy.act(obs)) for obs in observations]
    as_json = [{agent: obs.tolist() for agent, obs in o.items()} for o in observations]
    with tracking_uri(store.uri):
        model = mlflow.pyfunc.load_model(uri)
    assert model.predict(as_json[0]) == expected[0]
    assert model.predict(as_json) == expected
    assert model.predict(pd.DataFrame(as_json)) == expected
    assert expected[0] != expected[1] or expected[0]["agent_0"] in range(5)

    registered = CliRunner().invoke(
        app, ["runs", "register", run_id, "--name", "tiny_team", "--run-dir", str(runs["run_dir"])]
    )
    assert registered.exit_code == 0, registered.output
    assert "registered models:/tiny_team/1" in registered.stdout
    with tracking_uri(store.uri):
        deployed = mlflow.pyfunc.load_model("models:/tiny_team/1")
    assert deployed.predict(as_json) == expected


def test_runs_show_prints_checkpoint_config_and_key_metrics(runs: dict[str, Any]) -> None:
    (checkpoint, run_id), store = runs["matrix"], runs["store"]
    store.log_metrics(run_id, {names.TEAM_RETURN: -3.25, "env/success": 0.5, "shared/vf_loss": 1.0}, 1)
    result = CliRunner().invoke(app, ["runs", "show", run_id, "--run-dir", str(runs["run_dir"])])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"checkpoint        {checkpoint}" in out
    assert "  name: tiny_matrix" in out and "  env:" in out  # the config YAML
    assert "team_return_sum_mean  -3.25" in out and "env/success           0.5" in out
    assert "shared/vf_loss" not in out  # key metrics only
    assert f"orchestrl evaluate {run_id}" in out

    unknown = CliRunner().invoke(app, ["runs", "show", "f" * 32, "--run-dir", str(runs["run_dir"])])
    assert unknown.exit_code == 2
    assert unknown.stderr.strip() == f"error: run {'f' * 32}: no such run in the tracking store ({store.uri})"
