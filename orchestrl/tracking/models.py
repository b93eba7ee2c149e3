"""A training run's final policy as an MLflow model (pyfunc), and registering it.

The model is a policy folder (``orchestrl.experiment.policy``: the RLModule checkpoint and the
agent -> module table) logged as the artifact of a :class:`PolicyModel`; nothing is retrained or
re-exported, and the model object is named by code (``model_code.py``), not pickled. Loaded
through ``mlflow.pyfunc.load_model``, ``predict`` maps observations to greedy actions:

- one joint observation ``{agent: observation}`` -> ``{agent: action}``;
- a list of them, or a DataFrame with one row per joint observation and one column per agent,
  -> a list of ``{agent: action}``.

Observations and actions are JSON values (lists of numbers, nested objects for Dict spaces) or
numpy arrays, shaped as the env the team trained on gives them. Loading needs orchestrl importable
(the modules' classes live in it): ``mlflow models serve --env-manager local`` from orchestrl's
environment serves a logged or registered version.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import mlflow
import mlflow.pyfunc

from orchestrl.experiment.policy import TrainedPolicy, to_json
from orchestrl.tracking import names
from orchestrl.tracking.store import RunStore

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
MODEL_NAME = "policy"
"""The logged model's name (and its artifact key)."""


class PolicyModel(mlflow.pyfunc.PythonModel):
    """Observations -> greedy actions of a trained team (module docstring)."""

    _skip_type_hint_validation = True
    """MLflow's switch (as its ChatModel uses it) against wrapping ``predict`` in a type-hint
    check: observations are checked against the env's spaces instead, and an unhinted
    ``model_input`` would make it warn on every import."""

    def load_context(self, context: Any) -> None:
        self.policy = TrainedPolicy.load(context.artifacts[MODEL_NAME])

    def predict(self, context: Any, model_input, params: dict[str, Any] | None = None) -> Any:
        import pandas as pd

        if isinstance(model_input, pd.DataFrame):
            return [self.act(row) for row in model_input.to_dict(orient="records")]
        if isinstance(model_input, list):
            return [self.act(row) for row in model_input]
        return self.act(model_input)

    def act(self, observations: Mapping[str, Any]) -> dict[str, Any]:
        return to_json(self.policy.act(self.policy.observations(observations)))


@contextlib.contextmanager
def tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's fluent API (models, the registry) pointed at ``uri`` for the block, then back as it
    was: ``set_tracking_uri`` also exports ``MLFLOW_TRACKING_URI``, which orchestrl reads too."""
    from mlflow.tracking import is_tracking_uri_set

    exported = os.environ.get(TRACKING_URI_ENV)
    previous = mlflow.get_tracking_uri() if is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(previous)  # None: unset, as before
        if exported is not None:
            os.environ[TRACKING_URI_ENV] = exported


def log_policy_model(store: RunStore, run_id: str, policy_dir: str | Path) -> str:
    """Logs the policy folder ``policy_dir`` as run ``run_id``'s model ``policy`` and tags the run
    with its URI (``models:/<model id>``), which it returns."""
    import ray
    import torch

    requirements = [
        f"mlflow=={mlflow.__version__}",
        f"ray[rllib]=={ray.__version__}",
        f"torch=={torch.__version__}",
    ]
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # Model.log reads files back
    run = store.run(run_id)  # TrackingUnavailable during an outage: nothing half-logged
    # Created here, in the run's experiment: left to Model.log, a model logged outside an active
    # run goes to the default experiment, its files under ./mlruns of whatever the working dir is.
    model = store.client.create_logged_model(
        run.experiment_id, name=MODEL_NAME, source_run_id=run_id, params=dict(run.params)
    )
    with tracking_uri(store.uri):
        info = mlflow.models.Model.log(
            artifact_path=None,
            model_id=model.model_id,
            name=MODEL_NAME,
            flavor=mlflow.pyfunc,
            python_model=str(Path(__file__).with_name("model_code.py")),  # models from code: no pickle
            artifacts={MODEL_NAME: str(policy_dir)},
            pip_requirements=requirements,  # given, so MLflow does not load the model to infer them
            run_id=run_id,
        )
    uri = f"models:/{info.model_id}"
    store.set_tags(run_id, {names.TAG_MODEL: uri})
    return uri


def register_policy_model(store: RunStore, run_id: str, name: str) -> int:
    """Registers run ``run_id``'s policy model as a new version of ``name``; returns the version."""
    uri = store.run(run_id).tags.get(names.TAG_MODEL)
    if not uri:
        raise LookupError(f"run {run_id} logged no policy model (tag {names.TAG_MODEL})")
    with tracking_uri(store.uri):
        version = mlflow.register_model(uri, name, await_registration_for=0)
    return int(version.version)
