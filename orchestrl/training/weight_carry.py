"""Carrying module weights into a freshly built algorithm: from a checkpoint (curriculum stages), or
from the learner itself after a warm start changed it in place (:func:`sync_learner_weights`).

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
from typing import Any, Literal

import numpy as np

Parts = Literal["auto", "actor", "all"]
RL_MODULE_DIR = Path("learner_group") / "learner" / "rl_module"


class CarryError(RuntimeError):
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
    root = Path(checkpoint)
    for candidate in (root, root / "algorithm"):
        if (candidate / RL_MODULE_DIR).is_dir():
            return candidate / RL_MODULE_DIR
    raise CarryError(f"{checkpoint}: not an algorithm checkpoint (no {RL_MODULE_DIR})")


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
    algo: Any,
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


def push_weights_to_env_runners(algo: Any) -> None:
    """Sync the learner's inference-only weights to every (training and eval) env runner, waiting
    for the calls to land rather than firing and forgetting."""
    for runners in (algo.env_runner_group, getattr(algo, "eval_env_runner_group", None)):
        if runners is None:
            continue
        runners.fetch_ready_async_reqs(tags="set_state", timeout_seconds=30)
        runners.sync_weights(
            from_worker_or_learner_group=algo.learner_group, inference_only=True, timeout_seconds=30
        )


def sync_learner_weights(algo: Any) -> float:
    """After a warm start changed the learner's modules in place (behaviour cloning, NeuroMAS
    growth): every learner takes the first one's weights, every env runner the learner's. Returns
    the largest |difference| read back from the runners (0.0); raises :class:`CarryError` otherwise."""
    group = algo.learner_group
    if not group.is_local:  # a warm start ran on each learner; all must start from the same weights
        modules = group.get_state(components="learner/rl_module")["learner"]["rl_module"]
        group.set_state({"learner": {"rl_module": modules}})
    push_weights_to_env_runners(algo)
    inference = group.get_state(components="learner/rl_module", inference_only=True)["learner"]["rl_module"]
    expected = {mid: {k: np.asarray(v) for k, v in state.items()} for mid, state in inference.items()}
    gap = runner_weight_gap(algo, expected)
    if gap != 0.0:
        raise CarryError(f"env runners do not hold the warm-started weights (max |diff| {gap:g})")
    return gap


def runner_weight_gap(algo: Any, expected: dict[str, dict[str, np.ndarray]]) -> float:
    """Largest |difference| between each env runner's module tensors and ``expected`` (per module,
    compared on the keys the runner holds: env runners carry inference-only modules)."""
    mids = list(expected)

    def read(runner: Any) -> dict[str, dict[str, np.ndarray]]:
        if getattr(runner, "module", None) is None:  # a local runner without env or module
            return {}
        return {m: {k: np.asarray(v) for k, v in runner.module[m].get_state().items()} for m in mids}

    gap = 0.0
    states = [s for s in algo.env_runner_group.foreach_env_runner(read) if s]
    if not states:
        raise CarryError("no env runner answered the weight check")
    for state in states:
        for mid, tensors in state.items():
            for key, value in tensors.items():
                gap = max(gap, float(np.max(np.abs(value - expected[mid][key]))))
    return gap
