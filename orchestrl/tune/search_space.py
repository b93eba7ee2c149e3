"""Search spaces over experiment keys, and the base experiment that sweeps and curricula start from.

A sweep or curriculum YAML names a base experiment (a ``configs/*.yaml``) plus dotted
overrides; a search space maps dotted experiment keys to one of four kinds of dimension::

    space:
      training.lr: {loguniform: [1.0e-4, 1.0e-2]}
      training.clip_param: {uniform: [0.1, 0.3]}
      training.entropy_coeff: {choice: [0.0, 0.01]}
      model.hidden: {grid: [[32], [64, 64]]}

Every dimension is checked against the base experiment before anything starts: each value a
dimension can produce (each choice, each grid value, both bounds and an interior point of a range)
is applied to the base and validated like an experiment YAML. A misspelt key, an env kwarg the env
does not take, or a value of the wrong type then fails with a one-line :class:`ConfigError`
naming the file and the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrl.experiment.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    read_yaml,
    validate_config,
)
from orchestrl.tracking.metrics import is_curated_metric

KINDS = ("choice", "uniform", "loguniform", "grid")
UNSEARCHABLE = ("name", "run_dir")


def check_metric(name: str, source: str, key: str) -> None:
    if not is_curated_metric(name):
        raise ConfigError(
            f"{source}: {key}: '{name}' is not a curated metric "
            "(e.g. team_return_sum_mean, env/success, eval/env/success, shared/vf_explained_var)"
        )


@dataclass(frozen=True)
class Dimension:
    """One searched key: ``kind`` in :data:`KINDS`; ``values`` (choice, grid) or ``low``/``high``."""

    key: str
    kind: str
    values: tuple[Any, ...] = ()
    low: float = 0.0
    high: float = 0.0

    def describe(self) -> str:
        if self.kind in ("choice", "grid"):
            return f"{self.kind}({', '.join(repr(v) for v in self.values)})"
        return f"{self.kind}({self.low:g}, {self.high:g})"

    def probes(self) -> list[Any]:
        """Values this dimension can produce that together exercise its key's validation."""
        if self.kind in ("choice", "grid"):
            return list(self.values)
        if self.kind == "loguniform":
            inner = math.exp(math.log(self.low) + 0.37 * (math.log(self.high) - math.log(self.low)))
        else:
            inner = self.low + 0.37 * (self.high - self.low)
        return [self.low, self.high, inner]

    def to_tune(self) -> Any:
        from ray import tune

        if self.kind == "choice":
            return tune.choice(list(self.values))
        if self.kind == "grid":
            return tune.grid_search(list(self.values))
        if self.kind == "uniform":
            return tune.uniform(self.low, self.high)
        return tune.loguniform(self.low, self.high)

    def mutation(self) -> Any:
        """What PBT resamples this key from."""
        return list(self.values) if self.kind == "choice" else self.to_tune()


def parse_dimension(key: str, raw: Any, source: str) -> Dimension:
    where = f"{source}: space.{key}"
    if key.split(".")[0] in UNSEARCHABLE:
        raise ConfigError(f"{where}: '{key.split('.')[0]}' cannot be searched")
    if not isinstance(raw, Mapping) or len(raw) != 1 or next(iter(raw)) not in KINDS:
        raise ConfigError(f"{where}: expected one of {{{', '.join(k + ': ...' for k in KINDS)}}}")
    kind, arg = next(iter(raw.items()))
    if kind in ("choice", "grid"):
        if not isinstance(arg, list) or not arg:
            raise ConfigError(f"{where}: {kind} needs a non-empty list of values")
        return Dimension(key, kind, values=tuple(arg))
    if not isinstance(arg, list) or len(arg) != 2:
        raise ConfigError(f"{where}: {kind} needs [low, high]")
    try:
        low, high = (float(v) for v in arg)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {kind} bounds must be numbers (got {arg!r})") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low >= high:
        raise ConfigError(f"{where}: {kind} needs finite bounds with low < high (got {arg!r})")
    if kind == "loguniform" and low <= 0:
        raise ConfigError(f"{where}: loguniform bounds must be > 0 (got {arg!r})")
    return Dimension(key, kind, low=low, high=high)


def parse_space(raw: Mapping[str, Any], base: Mapping[str, Any], source: str) -> dict[str, Dimension]:
    """Parses and validates every dimension against ``base`` (a validated experiment dict)."""
    if not raw:
        raise ConfigError(f"{source}: space: needs at least one key to search")
    dims = {key: parse_dimension(key, value, source) for key, value in raw.items()}
    for dim in dims.values():
        for value in dim.probes():
            check_override(base, dim.key, value, f"{source}: space.{dim.key}", dim.kind)
    return dims


def check_override(base: Mapping[str, Any], key: str, value: Any, where: str, kind: str = "") -> None:
    """Validates ``base`` with ``key`` set to ``value``; a problem becomes one line naming ``where``."""
    marker = "<override>"
    try:
        validate_config(apply_overrides(dict(base), {key: value}), source=marker)
    except ConfigError as err:
        problem = str(err).removeprefix(f"{marker}: ").removeprefix("--set ")
        if problem.endswith(": unknown key") or "takes no kwarg" in problem or "is not a section" in problem:
            raise ConfigError(f"{where}: unknown experiment key ({problem})") from None
        if kind in ("uniform", "loguniform") and isinstance(value, float) and not value.is_integer():
            raise ConfigError(
                f"{where}: {kind} samples floats but {key} rejects {value:g} ({problem}); "
                "use choice or grid for integer keys"
            ) from None
        raise ConfigError(f"{where}: value {value!r} is rejected ({problem})") from None


# -- the base experiment -------------------------------------------------------------------------
def resolve_path(spec_path: Path, ref: str) -> Path:
    """A relative ``base:`` is tried next to the spec file, then from the working directory."""
    candidate = Path(ref)
    if candidate.is_absolute():
        return candidate
    for root in (spec_path.parent, Path.cwd()):
        if (root / candidate).is_file():
            return (root / candidate).resolve()
    return candidate


def load_base(
    spec_path: Path,
    base: str,
    overrides: Mapping[str, Any],
    run_dir: str | None = None,
    where: str = "base",
) -> tuple[Path, dict[str, Any], ExperimentConfig]:
    """The base experiment with the spec's overrides applied, validated; ``run_dir`` made absolute
    (Tune runs trials in their own working directory, so a relative one would move)."""
    base_path = resolve_path(spec_path, base)
    if not base_path.is_file():
        raise ConfigError(f"{spec_path}: {where}: no such experiment file '{base}'")
    data = read_yaml(base_path)
    for key, value in overrides.items():
        check_override(data, key, value, f"{spec_path}: overrides.{key}")
    data = apply_overrides(data, overrides)
    if run_dir is not None:
        data["run_dir"] = run_dir
    cfg = validate_config(data, source=str(base_path))
    data["run_dir"] = str(Path(cfg.run_dir).resolve())
    cfg = validate_config(data, source=str(base_path))
    return base_path, cfg.to_dict(), cfg


def resolve_trial_config(config: Mapping[str, Any]) -> ExperimentConfig:
    """A Tune trial's config (``{"experiment": base dict, "<dotted key>": value, ...}``) as the
    experiment it runs; every other top-level key is a dotted override of the base."""
    overrides = {k: v for k, v in config.items() if "." in k or k in ExperimentConfig.model_fields}
    return validate_config(apply_overrides(dict(config["experiment"]), overrides), source="<trial>")
