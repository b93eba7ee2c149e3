"""A trained team, found from what a user has after ``orchestrl train``: a run id or a checkpoint.

- A **run id** is looked up in the tracking store: its ``orchestrl.checkpoint`` tag is the
  checkpoint, its ``orchestrl.config_path`` tag the resolved experiment YAML.
- A **checkpoint folder** (``.../checkpoints/iter_000010``, a Tune trial's ``.../algorithm``)
  finds its YAML in its run folder (``config.yaml`` up to three levels above it, or a trial's
  ``orchestrl/config.yaml``); its training run is the one tagged with that YAML.

``--set`` overrides apply to that YAML, so a team can be evaluated or served on another env config.
Whatever does not resolve raises :class:`TeamError` with one line naming the culprit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from orchestrl.errors import ConfigError
from orchestrl.experiment.config import ExperimentConfig, load_config
from orchestrl.experiment.policy import RL_MODULE_DIR, PolicyError, TrainedPolicy, find_module_dir
from orchestrl.tracking import names
from orchestrl.tracking.store import RunStore, UnknownRunError, resolve_tracking_uri

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

Split = Literal["heldout", "train"]
RUN_ID = re.compile(r"^[0-9a-f]{32}$")


class TeamError(ValueError):
    """A run id or checkpoint that does not lead to a usable team; the message is one line."""


@dataclass
class TrainedTeam:
    """A checkpoint with the experiment it was trained in (and its training run, when known)."""

    checkpoint: Path
    config_path: Path
    config: ExperimentConfig
    """The run's experiment with the ``--set`` overrides applied."""
    tracking_uri: str
    run_id: str | None = None
    """The training run, when the tracking store holds it (an evaluation nests under it)."""

    def store(self) -> RunStore:
        return RunStore(self.tracking_uri)

    def split_config(self, split: Split) -> ExperimentConfig:
        """The experiment on ``split``: ``heldout`` applies ``evaluation.env_overrides``."""
        cfg = self.config.model_copy(deep=True)
        if split == "heldout":
            cfg.env.kwargs = {**cfg.env.kwargs, **cfg.evaluation.env_overrides}
        return cfg

    def rllib_config(self, split: Split) -> PPOConfig:
        """The RLlib config of the experiment on ``split`` (the env is built once to read its spaces)."""
        from orchestrl.experiment.builder import build_ppo_config

        cfg = self.split_config(split)
        try:
            return build_ppo_config(cfg)
        except ConfigError:
            raise
        except Exception as err:  # the env's own factory rejects its kwargs, a dataset is missing...
            raise TeamError(
                f"{self.checkpoint}: cannot rebuild its env '{cfg.env.name}' with kwargs {cfg.env.kwargs}: "
                f"{one_line(err)}"
            ) from None

    def policy(self, ppo: PPOConfig) -> TrainedPolicy:
        """The checkpoint's greedy policy in the env of ``ppo``."""
        info = {"env": self.config.env.name, "algorithm": self.config.algorithm.name}
        try:
            return TrainedPolicy.from_checkpoint(self.checkpoint, ppo, info)
        except PolicyError as err:
            raise TeamError(str(err)) from None


def find_team(
    target: str,
    *,
    run_dir: str | None = None,
    tracking_uri: str | None = None,
    overrides: list[str] | None = None,
) -> TrainedTeam:
    """The team that ``target`` (a run id or a checkpoint folder) names (module docstring).

    ``run_dir``: where the tracking store lives (default: ``runs`` for a run id, the experiment's
    own ``run_dir`` for a checkpoint).
    """
    path = Path(target).expanduser()
    if path.exists():
        return _from_checkpoint(path, run_dir, tracking_uri, overrides or [])
    if RUN_ID.match(target):
        return _from_run(target, run_dir, tracking_uri, overrides or [])
    raise TeamError(f"{target}: neither a checkpoint folder nor a run id")


def _from_checkpoint(
    path: Path, run_dir: str | None, tracking_uri: str | None, overrides: list[str]
) -> TrainedTeam:
    if not path.is_dir() or find_module_dir(path) is None:
        raise TeamError(f"{path}: not a checkpoint (no {RL_MODULE_DIR} inside)")
    config_path = find_config(path)
    if config_path is None:
        raise TeamError(f"{path}: no {names.CONFIG_FILE} in the run folder above the checkpoint")
    cfg = load_config(config_path, overrides)
    uri = resolve_tracking_uri(Path(run_dir or cfg.run_dir), tracking_uri or cfg.tracking.uri)
    return TrainedTeam(path.resolve(), config_path, cfg, uri)


def _from_run(
    run_id: str, run_dir: str | None, tracking_uri: str | None, overrides: list[str]
) -> TrainedTeam:
    uri = resolve_tracking_uri(Path(run_dir or "runs"), tracking_uri)
    database = Path(uri.removeprefix("sqlite:///"))
    if uri.startswith("sqlite:///") and not database.is_file():
        raise TeamError(f"run {run_id}: no tracking store at {database} (give --run-dir or --tracking-uri)")
    try:
        run = RunStore(uri).run(run_id)
    except UnknownRunError:
        raise TeamError(f"run {run_id}: no such run in the tracking store ({uri})") from None
    checkpoint = run.tags.get(names.TAG_CHECKPOINT)
    if not checkpoint:
        raise TeamError(f"run {run_id} ('{run.name}') has no checkpoint (tag {names.TAG_CHECKPOINT})")
    path = Path(checkpoint)
    if find_module_dir(path) is None:
        raise TeamError(f"run {run_id}: its checkpoint {checkpoint} is not on this machine")
    config_path = Path(run.tags.get(names.TAG_CONFIG) or find_config(path) or "")
    if not config_path.is_file():
        raise TeamError(f"run {run_id}: its config ({run.tags.get(names.TAG_CONFIG)}) is not on this machine")
    return TrainedTeam(path.resolve(), config_path, load_config(config_path, overrides), uri, run_id)


def find_config(checkpoint: Path) -> Path | None:
    """The experiment YAML of a checkpoint's run folder (module docstring)."""
    folder = checkpoint.resolve()
    for _ in range(4):
        for candidate in (folder / names.CONFIG_FILE, folder / "orchestrl" / names.CONFIG_FILE):
            if candidate.is_file():
                return candidate
        folder = folder.parent
    return None


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")
