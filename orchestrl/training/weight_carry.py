"""Carrying module weights into a freshly built algorithm: from a checkpoint: a curriculum stage
starts from the previous stage's modules.

A stage of a curriculum is a new run: new env (more agents, another level), new algorithm, same
module ids. Its modules start from the previous stage's. The weights go into the learner first.
Then they are pushed to every env runner explicitly, and read back from the runners to check
that they arrived. The check matters: RLlib's ``restore_from_path(component=...)`` syncs through
fire-and-forget requests, and a sync issued while another ``set_state`` request is in flight is
dropped without a word. The runners then sample the first iteration with random weights (measured;
see the team's RLlib notes).

What transfers is decided per module:

- the *actor* is the inference-only part of the module (what env runners hold). It must match in
  shape: a shared actor with a fixed-size observation transfers across any number of agents.
- every other attribute (e.g. a ``critic``) is carried when all its tensors match in shape. When
  one does not (a centralised critic whose input grows with N), ``parts="auto"`` keeps the new
  module's fresh initialisation for that attribute and reports it. ``parts="all"`` refuses.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from orchestrl.algorithms.weight_sync import WeightSyncError, push_weights_to_env_runners, runner_weight_gap
from orchestrl.experiment.policy import RL_MODULE_DIR, find_module_dir

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm

Parts = Literal["auto", "actor", "all"]


class CarryError(WeightSyncError):
    """The checkpoint's weights cannot be carried into this algorithm's modules."""


@dataclass
class CarryReport:
    """What a carry did: which modules came from where, what was re-initialised, and the check."""

    checkpoint: str
    parts: str
    carried: dict[str, str] = field(default_factory=dict)
    """New module id -> the checkpoint's module id its weights came from."""
    reinitialised: dict[str, list[str]] = field(default_factory=dict)
    """Module id -> attributes left at their fresh initialisation (shape changed, or parts=actor)."""
    fresh: list[str] = field(default_factory=list)
    """Modules with no counterpart in the checkpoint (random initialisation)."""
    runner_max_abs_diff: float = float("nan")
    """Largest |runner weight - checkpoint weight| over every env runner's carried actors (0.0)."""

    def lines(self) -> list[str]:
        out = [f"carried {new} <- {old}" for new, old in self.carried.items()]
        out += [
            f"re-initialised {mid}.{attr} (shape changed or parts={self.parts})"
            for mid, attrs in self.reinitialised.items()
            for attr in attrs
        ]
        out += [f"{mid}: no counterpart in the checkpoint, random init" for mid in self.fresh]
        out.append(f"env runners hold the carried actor weights (max |diff| {self.runner_max_abs_diff:g})")
        return out

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def module_dir(checkpoint: str | Path) -> Path:
    """The ``rl_module`` folder of an algorithm checkpoint (ours nest it under ``algorithm/``)."""
    found = find_module_dir(checkpoint)
    if found is None:
        raise CarryError(f"{checkpoint}: not an algorithm checkpoint (no {RL_MODULE_DIR})")
    return found


def checkpoint_module_states(checkpoint: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """Every module's full state (actor and critic) in a checkpoint, as numpy arrays."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    states = {}
    for path in sorted(p for p in module_dir(checkpoint).iterdir() if p.is_dir()):
        module = RLModule.from_checkpoint(str(path))
        states[path.name] = {k: np.asarray(v) for k, v in module.get_state().items()}
    return states


def _attribute(key: str) -> str:
    return key.split(".", 1)[0]


def merge_state(
    module_id: str,
    target: dict[str, np.ndarray],
    actor_keys: set[str],
    source: dict[str, np.ndarray],
    parts: Parts,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """``target`` with the carried tensors of ``source`` put in; returns it and the attributes
    left as initialised. Pure (numpy only) so the rules are testable without building anything."""
    merged = dict(target)
    for key in sorted(actor_keys):
        if key not in source or source[key].shape != target[key].shape:
            got = source[key].shape if key in source else "missing"
            raise CarryError(
                f"module {module_id}: actor tensor {key}: checkpoint {got} vs now {target[key].shape}; "
                "the actor cannot transfer (keep its observation size fixed: e.g. simple_spread "
                "num_agent_neighbors / num_landmark_neighbors, agent_id_in_obs off)"
            )
        merged[key] = source[key]
    rest: dict[str, list[str]] = {}
    for key in target:
        if key not in actor_keys:
            rest.setdefault(_attribute(key), []).append(key)
    reinitialised = []
    for attr, keys in sorted(rest.items()):
        fits = all(k in source and source[k].shape == target[k].shape for k in keys)
        if parts == "actor" or (parts == "auto" and not fits):
            reinitialised.append(attr)
            continue
        if not fits:
            raise CarryError(
                f"module {module_id}: '{attr}' changed shape since the checkpoint; use carry parts "
                "'auto' (re-initialise it) or 'actor'"
            )
        for k in keys:
            merged[k] = source[k]
    return merged, reinitialised


def carry_modules(
    algo: Algorithm,
    checkpoint: str | Path,
    *,
    parts: Parts = "auto",
    module_map: dict[str, str] | None = None,
) -> CarryReport:
    """Loads ``checkpoint``'s module weights into ``algo``'s learner and env runners and checks the
    env runners hold them. ``module_map`` maps a new module id to a checkpoint module id (default:
    the same id)."""
    report = CarryReport(checkpoint=str(checkpoint), parts=parts)
    sources = checkpoint_module_states(checkpoint)
    group = algo.learner_group
    full = group.get_state(components="learner/rl_module")["learner"]["rl_module"]
    inference = group.get_state(components="learner/rl_module", inference_only=True)["learner"]["rl_module"]
    new_state: dict[str, dict[str, np.ndarray]] = {}
    for mid, target in full.items():
        src_id = (module_map or {}).get(mid, mid)
        if src_id not in sources:
            report.fresh.append(mid)
            continue
        target = {k: np.asarray(v) for k, v in target.items()}
        merged, reinit = merge_state(mid, target, set(inference[mid]), sources[src_id], parts)
        new_state[mid] = merged
        report.carried[mid] = src_id
        if reinit:
            report.reinitialised[mid] = reinit
    if not new_state:
        raise CarryError(
            f"{checkpoint}: none of the modules {sorted(full)} has a counterpart in the checkpoint "
            f"(it holds {sorted(sources)}); map them with carry.modules"
        )
    group.set_state({"learner": {"rl_module": new_state}})
    push_weights_to_env_runners(algo)
    report.runner_max_abs_diff = runner_weight_gap(
        algo, {mid: sources[report.carried[mid]] for mid in report.carried}
    )
    if not report.runner_max_abs_diff == 0.0:
        raise CarryError(
            f"env runners do not hold the carried weights after the sync "
            f"(max |diff| {report.runner_max_abs_diff:g})"
        )
    return report
