"""The typed experiment config: one YAML file = one runnable experiment.

Every knob a user may turn lives in one of the sections below, each a small pydantic model that
forbids unknown keys. Algorithm-specific knobs live in the algorithm's own config class (see
:mod:`orchestrl.experiment.algorithms`), validated against ``algorithm.name``, in the spirit of
BenchMARL's per-algorithm dataclasses.

Errors are raised as :class:`ConfigError`, whose message is one line naming the file and the
dotted key, so the CLI can print it and exit with code 2 before anything starts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from orchestrl.algorithms.context import ModelSection, WarmStartSection
from orchestrl.errors import ConfigError

__all__ = ["ConfigError", "ExperimentConfig", "ModelSection", "WarmStartSection"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EnvSection(_Section):
    """Which registered env to train on, and its kwargs."""

    name: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    agent_id_in_obs: bool = False
    """Append a one-hot agent id to each observation (lets a shared policy specialise)."""


class AlgorithmSection(BaseModel):
    """``name`` picks the algorithm; every other key belongs to that algorithm's config class.

    Frozen, so the typed knobs, validated once, always match the keys."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    _typed: BaseModel | None = PrivateAttr(default=None)

    def knobs(self) -> dict[str, Any]:
        """The algorithm's keys as written (without ``name``)."""
        return dict(self.model_extra or {})

    def typed_knobs(self) -> BaseModel:
        """The knobs as an instance of the algorithm's config class, validated on the first call
        (:func:`validate_config` makes it, turning a pydantic ``ValidationError`` into a
        :class:`ConfigError`) and kept."""
        if self._typed is None:
            from orchestrl.experiment.algorithms import get_algorithm

            self._typed = get_algorithm(self.name).config_class.model_validate(self.knobs())
        return self._typed


class TrainingSection(_Section):
    """PPO's optimisation knobs, shared by every PPO-based algorithm."""

    lr: float = Field(3e-4, gt=0)
    gamma: float = Field(0.99, ge=0, le=1)
    lambda_: float = Field(0.95, ge=0, le=1)
    clip_param: float = Field(0.2, gt=0)
    vf_clip_param: float = Field(1e6, gt=0)
    vf_loss_coeff: float = Field(0.5, ge=0)
    entropy_coeff: float = Field(0.01, ge=0)
    grad_clip: float | None = Field(0.5, gt=0)
    num_epochs: int = Field(5, ge=1)
    minibatch_size: int = Field(512, ge=1)
    train_batch_size: int = Field(4000, ge=1)
    """Env steps per training iteration (with N agents on one module that is N x rows)."""


class ResourcesSection(_Section):
    """Where the work runs. Defaults fit a 2-core laptop; raise env_runners on a cluster."""

    env_runners: int = Field(2, ge=0)
    envs_per_env_runner: int = Field(4, ge=1)
    cpus_per_env_runner: float = Field(1.0, ge=0)
    num_learners: int = Field(0, ge=0)
    gpus_per_learner: float = Field(0.0, ge=0)
    cpu_fallback: bool = True
    """With gpus_per_learner > 0 but no GPU in the cluster, train on CPU instead of failing."""
    num_cpus: int | None = Field(None, ge=1)
    """CPUs for an embedded local Ray (None: all of this machine's)."""
    object_store_mb: int = Field(512, ge=64)
    restart_failed_env_runners: bool = True


class EvaluationSection(_Section):
    """Held-out evaluation: the env kwargs to override (e.g. a held-out task split)."""

    interval: int = Field(0, ge=0)
    """Evaluate every N iterations (0: only at the end when episodes > 0)."""
    episodes: int = Field(0, ge=0)
    env_overrides: dict[str, Any] = Field(default_factory=dict)


class TrackingSection(_Section):
    """MLflow tracking and checkpoints."""

    uri: str | None = None
    """MLflow tracking URI; None: ``MLFLOW_TRACKING_URI`` or the embedded SQLite store in run_dir."""
    experiment: str | None = None
    """MLflow experiment name; None: the experiment's name."""
    checkpoint_every: int = Field(10, ge=0)
    log_artifacts: bool = True
    journal_mb: float = Field(256, gt=0)
    """Bound of the run dir's journal of writes a remote tracking server has not taken yet (what
    happens at the bound: ``orchestrl.tracking.journal``)."""


class StopSection(_Section):
    """When to stop; the first condition met wins."""

    iterations: int | None = Field(20, ge=1)
    env_steps: int | None = Field(None, ge=1)
    time_s: float | None = Field(None, gt=0)
    metric: str | None = None
    """Stop once this curated metric (e.g. ``eval/success``) reaches ``threshold``."""
    threshold: float | None = None

    @model_validator(mode="after")
    def _metric_needs_threshold(self) -> StopSection:
        if (self.metric is None) != (self.threshold is None):
            raise ValueError("stop.metric and stop.threshold go together")
        return self


class ExperimentConfig(_Section):
    """A whole experiment, as resolved from YAML plus ``--set`` overrides."""

    name: str
    seed: int = 0
    run_dir: str = "runs"
    env: EnvSection
    algorithm: AlgorithmSection
    model: ModelSection = Field(default_factory=ModelSection)
    training: TrainingSection = Field(default_factory=TrainingSection)
    warm_start: WarmStartSection = Field(default_factory=WarmStartSection)
    resources: ResourcesSection = Field(default_factory=ResourcesSection)
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    stop: StopSection = Field(default_factory=StopSection)

    def cache_dir(self, name: str) -> Path:
        """``<run_dir>/cache/<name>``, absolute: where an env's generated data (and what is derived
        from it) lives, shared by every run in the run dir."""
        return Path(self.run_dir).resolve() / "cache" / name

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["algorithm"] = {"name": self.algorithm.name, **self.algorithm.knobs()}
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def flat_params(self) -> dict[str, str]:
        """The resolved config as dotted keys, for MLflow params."""
        return {k: str(v) for k, v in flatten(self.to_dict()).items()}


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def short_names(keys: Sequence[str]) -> dict[str, str]:
    """``training.lr`` -> ``lr``, unless two keys end alike or the last part alone would read as a
    top-level experiment key (``algorithm.name`` stays whole)."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    top = {"name", "seed", "run_dir", "env", "algorithm", "model", "training", "resources", "stop"}
    return {
        k: (s if last.count(s) == 1 and (s == k or s not in top) else k)
        for k, s in zip(keys, last, strict=True)
    }


def parse_overrides(overrides: Iterable[str]) -> dict[str, Any]:
    """``["training.lr=1e-3", "env.kwargs.N=4"]`` -> ``{"training.lr": 0.001, ...}`` (YAML-typed values)."""
    parsed: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        try:
            parsed[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise ConfigError(f"--set {item!r}: value is not valid YAML") from None
    return parsed


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Returns a copy of ``data`` with each dotted key set (intermediate mappings are created)."""
    data = copy.deepcopy(data)
    for dotted, value in overrides.items():
        node = data
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {dotted}: '{part}' is not a section")
            node = child
        node[leaf] = value
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where} not valid YAML") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_config(path: str | Path, overrides: Iterable[str] | Mapping[str, Any] = ()) -> ExperimentConfig:
    """Loads, overrides and validates an experiment, including env and algorithm names and knobs."""
    data = read_yaml(path)
    if not isinstance(overrides, Mapping):
        overrides = parse_overrides(overrides)
    return validate_config(apply_overrides(data, overrides), source=str(path))


def validate_config(data: Mapping[str, Any], source: str = "<config>") -> ExperimentConfig:
    from orchestrl.envs.registry import EnvKwargError, UnknownEnvError, get_env
    from orchestrl.experiment.algorithms import UnknownAlgorithmError, get_algorithm

    try:
        cfg = ExperimentConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {first_error(err)}") from None
    try:
        get_env(cfg.env.name).check_kwargs(cfg.env.kwargs)
    except UnknownEnvError as err:
        raise ConfigError(f"{source}: env.name: {err.args[0]}") from None
    except EnvKwargError as err:
        raise ConfigError(f"{source}: env.kwargs: {err}") from None
    try:
        get_algorithm(cfg.algorithm.name)
    except UnknownAlgorithmError as err:
        raise ConfigError(f"{source}: algorithm.name: {err.args[0]}") from None
    try:
        cfg.algorithm.typed_knobs()
    except ValidationError as err:
        raise ConfigError(f"{source}: {first_error(err, prefix='algorithm')}") from None
    return cfg


def first_error(err: ValidationError, prefix: str = "") -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in (prefix, *first["loc"]) if p != "")
    kind = first["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    value = first.get("input")
    shown = f" (got {value!r})" if not isinstance(value, dict | list) else ""
    return f"{loc}: {first['msg']}{shown}"
