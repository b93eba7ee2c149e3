"""Counterfactual credit assignment as a drop-in replacement for GAE (shared by LEMON and COMA).

The data path, with what this module adds in brackets::

    env runner: episodes (LEMON: the replay deltas in ``episode.custom_data``, see
                          :mod:`orchestrl.algorithms.lemon.replay`)
    learner pipeline:
        AddOneTsToEpisodesAndTruncate          (RLlib, prepended by PPOLearner)
        [AddCreditColumns]                     joint columns per row: team reward, agent index,
                                               global state, the other agents' actions, deltas
        RLlib's default pieces ... NumpyToTensor
        [a CounterfactualAdvantage subclass]   replaces GeneralAdvantageEstimation
    PPO loss (unchanged): clipped surrogate on ``advantages``, critic regressed on ``value_targets``

:class:`CounterfactualPPOLearner` is the PPO torch learner with exactly that swap, plus target
networks for modules that implement RLlib's ``TargetNetworkAPI`` (COMA's Q critic) and an optional
separate critic learning rate. Per-agent credit statistics are logged as learner metrics under
``credit/<agent>_...`` (curated by the platform as ``<module>/credit/<agent>_...``), and
:class:`CreditCallbacks` writes them as a per-agent credit table into ``<run_path>/artifacts/``.
"""

from __future__ import annotations

import abc
import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.learner import GeneralAdvantageEstimation
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.utils import update_target_network
from ray.rllib.core.rl_module.apis import TargetNetworkAPI, ValueFunctionAPI
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.postprocessing.value_predictions import compute_value_targets

from orchestrl.algorithms.actor_critic import GLOBAL_STATE, action_logit_lens, flat_obs_dim
from orchestrl.algorithms.mappo.connector import agent_state_rows, stacked_observations
from orchestrl.algorithms.mappo.connector import global_state_dim as mappo_state_dim
from orchestrl.algorithms.modules import with_actor_critic_modules
from orchestrl.envs.spaces import NotSimultaneousError
from orchestrl.training.callbacks import OrchestrlCallbacks

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

    from orchestrl.experiment.builder import EnvInfo
    from orchestrl.experiment.config import ExperimentConfig

# Batch columns added by AddCreditColumns (learner-only; env runners never see them).
TEAM_REWARD = "team_reward"
AGENT_INDEX = "agent_index"
OTHERS_ACTIONS = "others_actions"
CF_DELTA = "cf_delta"
CF_FAMILY = "cf_family"
REPLAY_KEY = "counterfactual_replay"
"""``MultiAgentEpisode.custom_data`` key: ``{agent: (delta, family index)}`` set on the env runner."""
CREDIT_PREFIX = "credit/"
CREDIT_TABLE = "credit_table.csv"


# -- what the learner reads from learner_config_dict["credit"] ---------------------------------------
@dataclass(frozen=True)
class CreditSpec:
    """Everything the shared learner needs: the advantage piece to append and its settings."""

    piece: type[ConnectorV2]
    """The :class:`CounterfactualAdvantage` subclass that replaces GAE."""
    piece_kwargs: Mapping[str, Any] = field(default_factory=dict)
    agents: tuple[str, ...] = ()
    """All agents, sorted: the order of joint columns and of credit statistics."""
    target_update_interval: int = 0
    """Hard-copy critic -> target critic every N learner updates (0: no target network)."""
    critic_lr: float | None = None
    """A separate learning rate for the critic (None: one optimiser at ``training.lr``)."""
    replay: Mapping[str, Any] | None = None
    """Runner-side replay settings (LEMON), read by the env runner's callbacks."""


def credit_spec(config: Any) -> CreditSpec:
    spec = (config.learner_config_dict or {}).get("credit")
    if not isinstance(spec, CreditSpec):
        raise ValueError("learner_config_dict['credit'] must hold a CreditSpec (see configure_credit)")
    return spec


# -- joint columns, before AgentToModuleMapping -------------------------------------------------------
def one_hot_actions(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """``[n]`` Discrete or ``[n, K]`` MultiDiscrete actions -> ``[n, sum(nvec)]`` one-hot rows."""
    lens = action_logit_lens(space)
    actions = np.asarray(actions, dtype=np.int64).reshape(len(actions), len(lens))
    out = np.zeros((len(actions), sum(lens)), dtype=np.float32)
    offset = 0
    for k, n in enumerate(lens):
        out[np.arange(len(actions)), offset + actions[:, k]] = 1.0
        offset += n
    return out


@dataclass
class _Joint:
    team_reward: np.ndarray
    observations: np.ndarray | None
    actions: dict[str, np.ndarray]


class AddCreditColumns(ConnectorV2):
    """Adds per-row joint columns, aligned with each agent's observation rows.

    Placed before RLlib's default pieces and after ``AddOneTsToEpisodesAndTruncate`` (so episodes
    already carry their artificial bootstrap step). Rows are emitted in the order of
    ``single_agent_episode_iterator(..., agents_that_stepped_only=False)``, the order the default
    pieces use, so every column lines up whatever order an episode stores its agents in.

    Columns: ``team_reward`` (mean of the agents' rewards at that env step), ``agent_index``
    (position in the sorted agent list), and optionally ``global_state`` (MAPPO's layout: all
    observations, own one-hot id, t/T), ``others_actions`` (every agent's one-hot action, the row's
    own slot zeroed) and LEMON's ``cf_delta`` / ``cf_family`` (NaN / -1 where no replay happened).
    """

    def __init__(
        self,
        *args: Any,
        agents: Sequence[str],
        horizon: int,
        action_spaces: Mapping[str, gym.Space],
        with_state: bool = False,
        with_others_actions: bool = False,
        with_replay: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.agents = list(agents)
        self.horizon = max(int(horizon), 1)
        self.action_spaces = dict(action_spaces)
        self.with_state = with_state
        self.with_others_actions = with_others_actions
        self.with_replay = with_replay
        self._slices: dict[str, slice] = {}
        offset = 0
        for a in self.agents:
            n = sum(action_logit_lens(self.action_spaces[a]))
            self._slices[a] = slice(offset, offset + n)
            offset += n

    def __call__(
        self,
        *,
        rl_module: Any,
        batch: dict[str, Any],
        episodes: list[MultiAgentEpisode],
        explore: bool | None = None,
        shared_data: dict | None = None,
        **kwargs: Any,
    ) -> Any:
        by_id = {ep.id_: ep for ep in episodes}
        joints: dict[str, _Joint] = {}
        for sa in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            ma = by_id[sa.multi_agent_episode_id]
            if ma.id_ not in joints:
                joints[ma.id_] = self._joint(ma)
            joint, n, aid = joints[ma.id_], len(sa), sa.agent_id
            idx = self.agents.index(aid)
            self._add(batch, TEAM_REWARD, joint.team_reward, sa)
            self._add(batch, AGENT_INDEX, np.full(n, idx, dtype=np.int64), sa)
            if self.with_state:
                state = agent_state_rows(
                    joint.observations, idx, len(self.agents), sa.t_started, self.horizon
                )
                self._add(batch, GLOBAL_STATE, state, sa)
            if self.with_others_actions:
                others = np.concatenate([joint.actions[a] for a in self.agents], axis=1)
                others[:, self._slices[aid]] = 0.0
                self._add(batch, OTHERS_ACTIONS, others, sa)
            if self.with_replay:
                delta, family = self._replay(ma, aid, n)
                self._add(batch, CF_DELTA, delta, sa)
                self._add(batch, CF_FAMILY, family, sa)
        return batch

    def _add(self, batch: dict[str, Any], column: str, items: np.ndarray, sa: Any) -> None:
        self.add_n_batch_items(batch, column, items, num_items=len(items), single_agent_episode=sa)

    def _joint(self, ma: MultiAgentEpisode) -> _Joint:
        episodes = {}
        for aid in self.agents:
            sa = ma.agent_episodes.get(aid)
            if sa is None:
                raise NotSimultaneousError(
                    f"agent {aid} did not act in an episode chunk: counterfactual credit needs every "
                    "agent to act at every env step"
                )
            episodes[aid] = sa
        lengths = {len(sa) for sa in episodes.values()}
        if len(lengths) != 1:
            raise NotSimultaneousError(
                f"agents took different numbers of steps {sorted(lengths)} in one episode chunk: "
                "counterfactual credit needs every agent to act at every env step"
            )
        n = lengths.pop()
        rewards = np.stack([np.asarray(sa.get_rewards(slice(0, n)), np.float32) for sa in episodes.values()])
        observations = None
        if self.with_state:
            observations = stacked_observations(list(episodes.values()), n)
        actions = {}
        if self.with_others_actions:
            actions = {
                aid: one_hot_actions(np.asarray(sa.get_actions(slice(0, n))), self.action_spaces[aid])
                for aid, sa in episodes.items()
            }
        return _Joint(team_reward=rewards.mean(axis=0), observations=observations, actions=actions)

    @staticmethod
    def _replay(ma: MultiAgentEpisode, aid: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        delta = np.full(n, np.nan, dtype=np.float32)
        family = np.full(n, -1, dtype=np.int64)
        record = (ma.custom_data.get(REPLAY_KEY) or {}).get(aid)
        if record is not None and n > 1:
            delta[: n - 1], family[: n - 1] = record[0], record[1]  # not the artificial last step
        return delta, family


class CreditColumnsConnector:
    """A picklable learner-connector factory (RLlib calls it with the spaces)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __call__(self, input_observation_space=None, input_action_space=None, **kwargs: Any) -> list:
        return [AddCreditColumns(input_observation_space, input_action_space, **self.kwargs)]


# -- the advantage piece that replaces GAE ------------------------------------------------------------
def numpy(x: Any) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def team_value_targets(
    values: np.ndarray, module_batch: Mapping[str, Any], gamma: float, lambda_: float
) -> np.ndarray:
    """TD(lambda) / GAE value targets on the TEAM reward column (RLlib's ``compute_value_targets``)."""
    return compute_value_targets(
        values=values.astype(np.float32),
        rewards=numpy(module_batch[TEAM_REWARD]).astype(np.float32),
        terminateds=numpy(module_batch[Columns.TERMINATEDS]).astype(np.float32),
        truncateds=numpy(module_batch[Columns.TRUNCATEDS]).astype(np.float32),
        gamma=gamma,
        lambda_=lambda_,
    )


def real_rows(module_batch: Mapping[str, Any]) -> np.ndarray:
    """Rows that count (not the artificial bootstrap step)."""
    if Columns.LOSS_MASK in module_batch:
        return numpy(module_batch[Columns.LOSS_MASK]).astype(bool)
    return np.ones(len(numpy(module_batch[TEAM_REWARD])), dtype=bool)


def credit_stats(
    advantages: np.ndarray, agent_index: np.ndarray, mask: np.ndarray, agents: Sequence[str]
) -> dict[str, float]:
    """Per agent of these rows: its mean advantage and mean |advantage|."""
    out: dict[str, float] = {}
    for i, agent in enumerate(agents):
        rows = mask & (agent_index == i)
        if rows.any():
            out[f"{CREDIT_PREFIX}{agent}_mean_adv"] = float(advantages[rows].mean())
            out[f"{CREDIT_PREFIX}{agent}_mean_abs_adv"] = float(np.abs(advantages[rows]).mean())
    return out


def credit_shares(mean_abs: Mapping[str, float]) -> dict[str, float]:
    """Each agent's share of the credit: its mean |A_i| over the sum of all agents' (any module)."""
    total = sum(mean_abs.values())
    return {a: (v / total if total > 0 else 1.0 / len(mean_abs)) for a, v in mean_abs.items()}


class CounterfactualAdvantage(ConnectorV2):
    """Base of the pieces that replace GAE: per module, ``advantages`` and ``value_targets``.

    Subclasses implement :meth:`module_advantages` (the maths lives in one function each, see
    :func:`orchestrl.algorithms.coma.advantage.coma_advantages` and
    :func:`orchestrl.algorithms.lemon.advantage.lemon_advantages`).
    """

    def __init__(
        self,
        input_observation_space: Any = None,
        input_action_space: Any = None,
        *,
        gamma: float,
        lambda_: float,
        agents: Sequence[str],
    ) -> None:
        super().__init__(input_observation_space, input_action_space)
        self.gamma = gamma
        self.lambda_ = lambda_
        self.agents = list(agents)
        self.updates = 0
        """How many batches this piece has turned into advantages (one per learner update)."""

    @abc.abstractmethod
    def module_advantages(
        self, module: Any, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """Returns (advantages [B], value targets [B], extra credit stats) for one module's rows."""

    def get_state(self, components: Any = None, *, not_components: Any = None, **kwargs: Any) -> dict:
        return {"updates": self.updates}  # checkpointed with the learner: a resumed run keeps its warm-up

    def set_state(self, state: dict) -> None:
        self.updates = int(state.get("updates", self.updates))

    def __call__(self, *, rl_module: Any, batch: dict[str, Any], metrics: Any = None, **kwargs: Any) -> Any:
        owner: dict[str, str] = {}
        mean_abs: dict[str, float] = {}
        for module_id, module_batch in batch.items():
            module = rl_module[module_id] if module_id in rl_module else None
            if module is None or not isinstance(module.unwrapped(), ValueFunctionAPI):
                continue
            if module.is_stateful():
                raise ValueError("counterfactual advantages do not support recurrent modules")
            mask = real_rows(module_batch)
            device = module_batch[TEAM_REWARD].device
            with torch.no_grad():
                advantages, targets, stats = self.module_advantages(module.unwrapped(), module_batch, mask)
            module_batch[Postprocessing.ADVANTAGES] = torch.as_tensor(
                advantages, dtype=torch.float32, device=device
            )
            module_batch[Postprocessing.VALUE_TARGETS] = torch.as_tensor(
                targets, dtype=torch.float32, device=device
            )
            stats.update(credit_stats(advantages, numpy(module_batch[AGENT_INDEX]), mask, self.agents))
            for agent in self.agents:
                key = f"{CREDIT_PREFIX}{agent}_mean_abs_adv"
                if key in stats:
                    owner[agent], mean_abs[agent] = module_id, stats[key]
            if metrics is not None:
                for key, value in stats.items():
                    metrics.log_value((module_id, key), value, window=1)
        if metrics is not None:
            for agent, share in credit_shares(mean_abs).items():
                metrics.log_value((owner[agent], f"{CREDIT_PREFIX}{agent}_share"), share, window=1)
        self.updates += 1
        return batch


def standardize(x: np.ndarray, mask: np.ndarray, center: bool = True) -> np.ndarray:
    """(x - mean) / std over the real rows (RLlib's GAE convention); ``center=False`` only scales."""
    if not mask.any():
        return x
    mean = float(x[mask].mean()) if center else 0.0
    return ((x - mean) / max(1e-4, float(x[mask].std()))).astype(np.float32)


class TeamGaeAdvantage(CounterfactualAdvantage):
    """GAE on the TEAM reward, standardised (RLlib's GAE, with team instead of per-agent rewards).

    The ``advantage: gae`` ablation of both estimators, and the team-level term LEMON mixes with.
    """

    def team_gae(
        self, module: Any, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Returns (standardised GAE advantages, value targets)."""
        values = numpy(module.compute_values(module_batch)).astype(np.float32)
        targets = team_value_targets(values, module_batch, self.gamma, self.lambda_)
        return standardize(targets - values, mask), targets

    def module_advantages(
        self, module: Any, module_batch: dict[str, Any], mask: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        advantages, targets = self.team_gae(module, module_batch, mask)
        return advantages, targets, {}


# -- the learner --------------------------------------------------------------------------------------
class CounterfactualPPOLearner(PPOTorchLearner):
    """PPO's torch learner with GAE swapped for a counterfactual advantage piece.

    RLlib appends ``GeneralAdvantageEstimation`` in ``PPOLearner.build()``; a ``learner_connector``
    can only add pieces before the defaults, so the swap happens here (``remove`` + ``append``,
    public ConnectorPipelineV2 methods). Modules implementing ``TargetNetworkAPI`` get target
    networks, hard-synced every ``target_update_interval`` updates.
    """

    def build(self) -> None:
        super().build()
        spec = credit_spec(self.config)
        if self._learner_connector is not None:
            self._learner_connector.remove(GeneralAdvantageEstimation)
            self._learner_connector.append(
                spec.piece(
                    gamma=self.config.gamma,
                    lambda_=self.config.lambda_,
                    agents=list(spec.agents),
                    **dict(spec.piece_kwargs),
                )
            )
        self._credit_updates = 0
        self.module.foreach_module(
            lambda mid, mod: mod.make_target_networks() if isinstance(mod, TargetNetworkAPI) else None
        )

    def configure_optimizers_for_module(self, module_id: str, config: Any = None) -> None:
        spec = credit_spec(self.config)
        module = self._module[module_id].unwrapped()
        if spec.critic_lr is None or not hasattr(module, "critic") or not hasattr(module, "actor"):
            super().configure_optimizers_for_module(module_id, config)
            return
        for name, net, lr in (("actor", module.actor, config.lr), ("critic", module.critic, spec.critic_lr)):
            params = list(net.parameters())
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=name,
                optimizer=torch.optim.Adam(params),
                params=params,
                lr_or_lr_schedule=lr,
            )

    def after_gradient_based_update(self, *, timesteps: dict[str, Any]) -> None:
        super().after_gradient_based_update(timesteps=timesteps)
        interval = credit_spec(self.config).target_update_interval
        self._credit_updates += 1
        if interval <= 0 or self._credit_updates % interval:
            return
        for module in self.module._rl_modules.values():
            unwrapped = module.unwrapped()
            if isinstance(unwrapped, TargetNetworkAPI):
                for main_net, target_net in unwrapped.get_target_network_pairs():
                    update_target_network(main_net=main_net, target_net=target_net, tau=1.0)


# -- configuring an experiment ------------------------------------------------------------------------
def global_state_dim(env: EnvInfo) -> int:
    """MAPPO's layout: all observations + one-hot agent id + t/T."""
    return mappo_state_dim([flat_obs_dim(env.observation_spaces[a]) for a in env.agents])


def joint_action_dim(env: EnvInfo) -> int:
    return sum(sum(action_logit_lens(env.action_spaces[a])) for a in env.agents)


def configure_credit(
    ppo: PPOConfig,
    cfg: ExperimentConfig,
    env: EnvInfo,
    spec: CreditSpec,
    *,
    share_policy: bool,
    critic: str,
    module_class: type | None = None,
    state_dim: int | None = None,
    extra_model_config: dict[str, Any] | None = None,
    with_others_actions: bool = False,
    callbacks: type = OrchestrlCallbacks,
) -> PPOConfig:
    """Modules + the credit columns + the learner that swaps GAE for ``spec.piece``."""
    module_kwargs = {"module_class": module_class} if module_class is not None else {}
    ppo = with_actor_critic_modules(
        ppo,
        cfg,
        env,
        share_policy=share_policy,
        critic=critic,
        state_dim=state_dim,
        extra_model_config=extra_model_config,
        **module_kwargs,
    )
    columns = CreditColumnsConnector(
        agents=list(env.agents),
        horizon=env.horizon,
        action_spaces=dict(env.action_spaces),
        with_state=state_dim is not None,
        with_others_actions=with_others_actions,
        with_replay=spec.replay is not None,
    )
    return ppo.learners(
        learner_class=CounterfactualPPOLearner,
        learner_connector=columns,
        learner_config_dict={"credit": spec},
    ).callbacks(callbacks)


# -- the per-agent credit table -----------------------------------------------------------------------
def credit_table(learner_results: Mapping[str, Any], agents: Sequence[str]) -> list[dict[str, Any]]:
    """One row per (module, agent): every ``credit/<agent>_<stat>`` learner metric as a column."""
    rows = []
    for module_id, stats in learner_results.items():
        if not isinstance(stats, Mapping):
            continue
        for agent in agents:
            prefix = f"{CREDIT_PREFIX}{agent}_"
            values = {k.removeprefix(prefix): _scalar(v) for k, v in stats.items() if k.startswith(prefix)}
            values = {k: v for k, v in values.items() if np.isfinite(v)}  # stats not seen this iteration
            if values:
                rows.append({"module": module_id, "agent": agent, **values})
    return rows


def _scalar(value: Any) -> float:
    value = value.peek() if hasattr(value, "peek") else value
    return float(numpy(value))


def write_credit_table(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Writes the table as CSV (columns: module, agent, then every stat seen, sorted)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stats = sorted({k for row in rows for k in row} - {"module", "agent"})
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["module", "agent", *stats], restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def train_run_path(algorithm: Any) -> Path | None:
    """The ``orchestrl train`` run folder of an Algorithm, or None outside ``orchestrl train``.

    ``checkpoints.build_algorithm`` roots the Algorithm's storage at ``<run_path>/ray_results``
    and ``train`` writes ``<run_path>/config.yaml`` first; RLlib offers no public accessor for
    the storage root, hence the one private attribute read here.
    """
    storage = getattr(algorithm, "_storage", None)
    root = getattr(storage, "storage_fs_path", None)
    if not root:
        return None
    run_path = Path(root).parent
    return run_path if (run_path / "config.yaml").is_file() else None


class CreditCallbacks(OrchestrlCallbacks):
    """Adds the per-agent credit table (``<run_path>/artifacts/credit_table.csv``), rewritten each
    iteration from the latest learner metrics; ``orchestrl train`` logs that folder to MLflow."""

    def on_train_result(self, *, algorithm: Any, result: dict, **kwargs: Any) -> None:
        run_path = train_run_path(algorithm)
        if run_path is None:
            return
        rows = credit_table(result.get("learners", {}) or {}, credit_spec(algorithm.config).agents)
        if rows:
            for row in rows:
                row["iteration"] = result.get("training_iteration")
            write_credit_table(rows, run_path / "artifacts" / CREDIT_TABLE)
