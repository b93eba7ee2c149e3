"""A trained team's policy outside RLlib's Algorithm: observations in, greedy actions out.

:class:`TrainedPolicy` does for one joint observation what an env runner does when it samples
with ``explore=False``: each agent's observation goes to its module (the experiment's
agent -> module table); the module's ``forward_inference`` returns either the actions (the NeuroMAS
graph samples its messages inside) or the logits; from the logits it takes the deterministic action
of the inference distribution (RLlib's ``GetActions``); a continuous action is unsquashed or
clipped to its space as RLlib's ``NormalizeAndClipActions`` does. The modules come from a
checkpoint through ``RLModule.from_checkpoint``. Neither Ray nor the env is needed, so
``orchestrl evaluate`` steps an env with it in-process, ``orchestrl serve`` answers ``POST /act``
with it, and the MLflow model wraps it. A team that plays rounds of one task can ask
:meth:`TrainedPolicy.act_fresh` for a joint action that runs no plan it already ran: its own next
most likely guess when the greedy one did.

Observations and actions are those of the env the team trained on, keyed by its agent ids: the
registered env (with its one-hot agent id appended when ``env.agent_id_in_obs``), and for neuromas
the one ``team`` agent whose observation holds every agent's (see
``orchestrl.algorithms.neuromas.team_env``). The policies here are memoryless (MLPs, the NeuroMAS
graph reads its time step from the observation), so one observation is all a step needs; a
recurrent module is refused.

A *policy folder* (:meth:`TrainedPolicy.save`) holds what acting needs and nothing else: the
modules (``rl_module/``, RLlib's own checkpoint format) and ``policy.json`` (the agent -> module
table and the action post-processing flags).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule

RL_MODULE_DIR = Path("learner_group") / "learner" / "rl_module"
"""Where an algorithm checkpoint keeps its modules (the learner's, critics included)."""
POLICY_FILE = "policy.json"
MODULES = "rl_module"


class PolicyError(ValueError):
    """A checkpoint the policy cannot be built from, or one that does not fit the env."""


class ObservationError(ValueError):
    """An observation that does not fit its agent's space; ``field`` is its dotted path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def find_module_dir(checkpoint: str | Path) -> Path | None:
    """The ``rl_module`` folder of an algorithm checkpoint (Tune trials nest it under
    ``algorithm/``) or of a policy folder; None when ``checkpoint`` is neither."""
    root = Path(checkpoint).expanduser().resolve()  # RLlib reads checkpoints through pyarrow: absolute
    for candidate in (root / RL_MODULE_DIR, root / "algorithm" / RL_MODULE_DIR, root / MODULES):
        if candidate.is_dir():
            return candidate
    return None


@dataclass
class TrainedPolicy:
    """The greedy joint policy of a trained team (module docstring)."""

    module: MultiRLModule
    agents: dict[str, str]
    """Env agent id -> module id."""
    normalize_actions: bool = True
    clip_actions: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    """What it was trained as (``env``, ``algorithm``, ``family``); for display only."""

    # -- building ----------------------------------------------------------------------------------
    @classmethod
    def from_checkpoint(
        cls, checkpoint: str | Path, config: AlgorithmConfig, info: Mapping[str, Any] | None = None
    ) -> TrainedPolicy:
        """The modules of ``checkpoint`` acting in the env of ``config`` (the experiment's RLlib
        config, rebuilt from its YAML); raises :class:`PolicyError` when the two do not fit."""
        from ray.rllib.core.rl_module.rl_module import RLModule

        from orchestrl.algorithms.modules import AgentToModule

        module_dir = find_module_dir(checkpoint)
        if module_dir is None:
            raise PolicyError(f"{checkpoint}: not a checkpoint (no {RL_MODULE_DIR} or {MODULES} inside)")
        mapping = config.policy_mapping_fn
        if not isinstance(mapping, AgentToModule):
            raise PolicyError(f"{checkpoint}: the experiment maps agents to modules with {mapping!r}")
        module = RLModule.from_checkpoint(str(module_dir))
        policy = cls(
            module=module,
            agents=dict(mapping.table),
            normalize_actions=bool(config.normalize_actions),
            clip_actions=bool(config.clip_actions),
            info=dict(info or {}),
        )
        policy.check_fits(config.policies, source=str(checkpoint))
        return policy

    def check_fits(self, policies: Mapping[str, Any], source: str) -> None:
        """Every module the env's agents map to is in the checkpoint, with the env's spaces."""
        for mid in sorted(set(self.agents.values())):
            if mid not in self.module:
                raise PolicyError(f"{source}: has no module '{mid}' (it holds {sorted(self.module.keys())})")
            held, spec = self.module[mid], policies[mid]
            for kind in ("observation", "action"):
                want, got = getattr(spec, f"{kind}_space"), getattr(held, f"{kind}_space")
                if want is not None and want != got:
                    raise PolicyError(
                        f"{source}: module '{mid}' was trained on {kind}s {got}, the env gives {want}"
                    )
            if held.is_stateful():
                raise PolicyError(f"{source}: module '{mid}' is recurrent; only memoryless policies act here")

    def save(self, folder: str | Path) -> Path:
        """Writes a policy folder (module docstring) and returns it."""
        folder = Path(folder).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        self.module.save_to_path(str(folder / MODULES))
        meta = {
            "agents": self.agents,
            "normalize_actions": self.normalize_actions,
            "clip_actions": self.clip_actions,
            "info": self.info,
        }
        (folder / POLICY_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> TrainedPolicy:
        """A policy folder written by :meth:`save`."""
        from ray.rllib.core.rl_module.rl_module import RLModule

        folder = Path(folder).resolve()
        if not (folder / POLICY_FILE).is_file() or not (folder / MODULES).is_dir():
            raise PolicyError(f"{folder}: not a policy folder (needs {POLICY_FILE} and {MODULES}/)")
        meta = json.loads((folder / POLICY_FILE).read_text())
        return cls(
            module=RLModule.from_checkpoint(str(folder / MODULES)),
            agents=dict(meta["agents"]),
            normalize_actions=bool(meta["normalize_actions"]),
            clip_actions=bool(meta["clip_actions"]),
            info=dict(meta.get("info", {})),
        )

    # -- acting ------------------------------------------------------------------------------------
    def spaces(self, agent: str) -> tuple[gym.Space, gym.Space]:
        """``agent``'s observation and action spaces."""
        module = self.module[self.agents[agent]]
        return module.observation_space, module.action_space

    def describe(self) -> dict[str, Any]:
        """Agents and their spaces, as JSON (what a client must send and gets back)."""
        return {
            **self.info,
            "agents": {
                agent: {"module": mid, "observation": str(obs), "action": str(act)}
                for agent, mid in sorted(self.agents.items())
                for obs, act in [self.spaces(agent)]
            },
        }

    def observations(self, data: Any, field: str = "observations") -> dict[str, Any]:
        """Observations as JSON (or numpy) -> checked arrays per agent; raises
        :class:`ObservationError` naming the first field that does not fit."""
        if not isinstance(data, Mapping) or not data:
            raise ObservationError(field, f"expected an object of agent -> observation ({self._known()})")
        out = {}
        for agent, value in data.items():
            if agent not in self.agents:
                raise ObservationError(f"{field}.{agent}", f"unknown agent ({self._known()})")
            out[agent] = from_json(value, self.spaces(agent)[0], f"{field}.{agent}")
        return out

    def act(self, observations: Mapping[str, Any]) -> dict[str, Any]:
        """Greedy actions of the agents in ``observations`` (checked by :meth:`observations`)."""
        import torch
        import tree
        from ray.rllib.utils.spaces.space_utils import clip_action, unsquash_action

        from orchestrl.algorithms.modules import chosen_actions, observation_batch

        by_module: dict[str, list[str]] = {}
        for agent in observations:
            by_module.setdefault(self.agents[agent], []).append(agent)
        actions: dict[str, Any] = {}
        with torch.no_grad():
            for mid, agents in by_module.items():
                module = self.module[mid]
                out = module.forward_inference(observation_batch(*[observations[a] for a in agents]))
                chosen = tree.map_structure(lambda t: t.numpy(), chosen_actions(module, out, explore=False))
                space = module.action_space
                for i, agent in enumerate(agents):
                    action = tree.map_structure(lambda a, i=i: a[i], chosen)
                    if self.normalize_actions:
                        action = unsquash_action(action, space)
                    elif self.clip_actions:
                        action = clip_action(action, space)
                    actions[agent] = to_env_action(action, space)
        return actions

    def act_fresh(
        self, observations: Mapping[str, Any], fresh: Callable[[dict[str, Any]], bool], per_component: int = 2
    ) -> dict[str, Any]:
        """The greedy joint action when ``fresh`` accepts it; else, of the joint actions where one
        agent's action is one of its module's next guesses (``one_change_alternatives``) and the
        other agents' stay greedy, the most likely one ``fresh`` accepts; else the greedy one. A
        team that plays rounds passes "a plan not run yet", so no round re-runs a plan: after a
        failed round it tries its own next most likely plan, as a search tries its next candidate.
        Raises :class:`PolicyError` for modules that cannot rank alternatives (the NeuroMAS graph)."""
        import torch

        from orchestrl.algorithms.modules import observation_batch

        greedy = self.act(observations)
        if fresh(greedy):
            return greedy
        ranked: list[tuple[float, str, Any]] = []
        with torch.no_grad():
            for agent in sorted(observations):
                module = self.module[self.agents[agent]]
                ranks = getattr(module.unwrapped(), "one_change_alternatives", None)
                if ranks is None:
                    raise PolicyError(f"module {self.agents[agent]!r} cannot rank alternative actions")
                action = torch.as_tensor(np.asarray(greedy[agent]))
                for drop, alternative in ranks(observation_batch(observations[agent]), action, per_component):
                    ranked.append((drop, agent, to_env_action(alternative.numpy(), module.action_space)))
        for _, agent, alternative in sorted(ranked, key=lambda t: -t[0]):
            joint = {**greedy, agent: alternative}
            if fresh(joint):
                return joint
        return greedy

    def _known(self) -> str:
        return "agents: " + ", ".join(sorted(self.agents))


def from_json(value: Any, space: gym.Space, field: str) -> Any:
    """``value`` as an element of ``space``; raises :class:`ObservationError` at ``field``."""
    if isinstance(space, gym.spaces.Dict):
        if not isinstance(value, Mapping):
            raise ObservationError(field, f"expected an object with keys {sorted(space.spaces)}")
        missing = sorted(set(space.spaces) - set(value))
        extra = sorted(set(value) - set(space.spaces))
        if missing or extra:
            wrong = f"missing {missing}" if missing else f"unexpected {extra}"
            raise ObservationError(field, f"{wrong} (expected keys {sorted(space.spaces)})")
        return {k: from_json(value[k], sub, f"{field}.{k}") for k, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        if not isinstance(value, list | tuple) or len(value) != len(space.spaces):
            raise ObservationError(field, f"expected a list of {len(space.spaces)} items")
        return tuple(
            from_json(v, sub, f"{field}[{i}]")
            for i, (v, sub) in enumerate(zip(value, space.spaces, strict=True))
        )
    if isinstance(value, str):
        raise ObservationError(field, f"expected numbers for {space}, got a string")
    try:
        raw = np.asarray(value, dtype=np.float64)
        arr = raw.astype(space.dtype)
    except (TypeError, ValueError):
        raise ObservationError(field, f"expected numbers for {space}") from None
    if not np.isfinite(raw).all():
        raise ObservationError(field, "holds NaN or infinite values")
    if np.issubdtype(arr.dtype, np.integer) and not np.array_equal(raw, arr):
        raise ObservationError(field, f"expected integers for {space}")
    if arr.shape != space.shape:
        raise ObservationError(field, f"expected shape {list(space.shape)}, got {list(arr.shape)}")
    if not space.contains(arr if arr.shape else arr.item()):
        raise ObservationError(field, f"outside {space}")
    return arr


def to_env_action(action: Any, space: gym.Space) -> Any:
    """A module's action as the env takes it (a Discrete action as an int)."""
    if isinstance(space, gym.spaces.Discrete):
        return int(np.asarray(action).reshape(-1)[0])
    return action


def to_json(value: Any) -> Any:
    """Actions (numpy, nested) as plain JSON values."""
    if isinstance(value, Mapping):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray | np.generic):
        return value.tolist()
    return value
