"""What a sweep YAML and a curriculum YAML share, and reading one: everything checked before Ray starts.

Both name a base experiment (relative to the YAML, or to the working directory), dotted overrides
set on it for every trial, and the resources each trial gets. :func:`load_spec` validates the YAML,
loads the base with its overrides and trial resources applied, and raises a one-line
:class:`ConfigError` naming the file and the key when something is off.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    first_error,
    read_yaml,
    validate_config,
)
from orchestrl.tune.search_space import check_override, load_base


class SpecModel(BaseModel):
    """A section of a sweep or curriculum YAML: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class TuneRunSpec(SpecModel):
    """What a sweep YAML and a curriculum YAML share: the base experiment and how trials run."""

    name: str
    base: str
    """The base experiment YAML (relative to this file, or to the working directory)."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """Dotted experiment keys set on the base for every trial."""
    trial_resources: dict[str, Any] = Field(default_factory=lambda: {"env_runners": 0})
    """``resources.*`` keys set for trials (default: sample in the trial's own process)."""
    checkpoint_every: int = Field(1, ge=1)
    """Trial checkpoint frequency in iterations (what a resume or PBT continues from)."""
    keep_checkpoints: int = Field(2, ge=1)
    experiment: str | None = None
    """MLflow experiment (default: the YAML's name)."""


SpecT = TypeVar("SpecT", bound=TuneRunSpec)


@dataclass
class TuneRun:
    """What a loaded sweep and a loaded curriculum share (each adds its own fields after these)."""

    path: Path
    spec: TuneRunSpec
    base_path: Path
    base: dict[str, Any]
    """The base experiment dict (overrides and trial resources applied, run_dir absolute)."""
    cfg: ExperimentConfig

    @property
    def experiment(self) -> str:
        return self.spec.experiment or self.spec.name

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.run_dir)


def validate_spec(model: type[BaseModel], data: dict[str, Any], source: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ConfigError(f"{source}: {first_error(err)}") from None


def apply_trial_resources(
    path: Path, base: dict[str, Any], trial_resources: dict[str, Any]
) -> tuple[dict[str, Any], ExperimentConfig]:
    """``base`` with ``resources.<key>`` set for each trial resource, each checked on its own."""
    overrides = {f"resources.{k}": v for k, v in trial_resources.items()}
    for key, value in overrides.items():
        check_override(base, key, value, f"{path}: trial_{key}")
    base = apply_overrides(base, overrides)
    return base, validate_config(base, source=str(path))


def load_spec(
    model: type[SpecT], path: str | Path, run_dir: str | None
) -> tuple[Path, SpecT, Path, dict[str, Any], ExperimentConfig]:
    """Reads the YAML at ``path`` as ``model`` and loads its base experiment: the path, the spec,
    and the base's path, dict and config (overrides and trial resources applied; ``run_dir``, when
    given, replaces the base's), in the order :class:`TuneRun` takes them."""
    path = Path(path)
    spec: SpecT = validate_spec(model, read_yaml(path), str(path))
    base_path, base, cfg = load_base(path, spec.base, spec.overrides, run_dir)
    base, cfg = apply_trial_resources(path, base, spec.trial_resources)
    return path, spec, base_path, base, cfg
