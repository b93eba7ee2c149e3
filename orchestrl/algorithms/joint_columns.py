"""Joint columns in the train batch: what one agent's row needs to know of the whole team.

One learner ConnectorV2 piece, :class:`AddJointColumns`, with a flag per column, serves every
algorithm that looks past an agent's own observation:

- ``global_state`` (MAPPO's centralised critic; Yu et al., "The Surprising Effectiveness of PPO in
  Cooperative Multi-Agent Games", 2022, Sec. 4 "agent-specific global state"): for agent i at env
  step t,

      s_i(t) = [ o_1(t), ..., o_N(t), onehot(i), t / T ]

  all agents' observations in a fixed (sorted) agent order, the row's own agent id (so one shared
  critic can still value each agent's prospects) and the normalised time step (a fixed-horizon env
  is not Markov without it);
- ``team_reward`` (the mean of the agents' rewards at that env step) and ``agent_index`` (the row's
  position in the sorted agent list): what counterfactual credit assigns;
- ``others_actions`` (COMA's critic input): every agent's one-hot action, the row's own slot zeroed;
- ``cf_delta`` / ``cf_family`` (LEMON): the replayed reward contrast the env runner stored in the
  episode, on the row of the action it edits: the agent's final action, the last real row of the
  episode chunk that ends the episode (NaN / -1 on every other row, and where no replay happened).

Actors never see these columns: they exist only in the learner. The piece runs after
``AddOneTsToEpisodesAndTruncate`` (episodes already carry their artificial bootstrap step, whose
joint state repeats the last one) and before RLlib's default pieces. Rows are added per single-agent
episode (``single_agent_episode_iterator(..., agents_that_stepped_only=False)``, the iteration the
default pieces use), so every column lines up with the observation rows whatever order an episode
stores its agents in. Joint columns need every agent to act at every env step; an env where agents
skip steps gets :class:`~orchestrl.envs.spaces.NotSimultaneousError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2

from orchestrl.algorithms.actor_critic import GLOBAL_STATE, action_logit_lens, flat_obs_dim
from orchestrl.envs.spaces import OBS_KEY, NotSimultaneousError

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    from orchestrl.envs.info import EnvInfo

TEAM_REWARD = "team_reward"
AGENT_INDEX = "agent_index"
OTHERS_ACTIONS = "others_actions"
CF_DELTA = "cf_delta"
CF_FAMILY = "cf_family"
REPLAY_KEY = "counterfactual_replay"
"""``MultiAgentEpisode.custom_data`` key: ``{agent: (delta, family index)}``, set on the env runner."""


def global_state_dim(env: EnvInfo) -> int:
    """The width of ``s_i(t)``: all observations + one-hot agent id + t/T."""
    return sum(flat_obs_dim(env.observation_spaces[a]) for a in env.agents) + len(env.agents) + 1


def joint_action_dim(env: EnvInfo) -> int:
    """The width of ``others_actions``: every agent's one-hot action."""
    return sum(sum(action_logit_lens(env.action_spaces[a])) for a in env.agents)


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


def stacked_observations(agent_episodes: Sequence[SingleAgentEpisode], n: int) -> np.ndarray:
    """The first ``n`` policy-visible observations of each agent episode, side by side."""
    per_agent = []
    for sa in agent_episodes:
        obs = sa.get_observations(slice(0, n))
        if isinstance(obs, dict):  # a numpy-ized episode: one array per key
            obs = obs[OBS_KEY]
        elif len(obs) and isinstance(obs[0], dict):  # a list episode (episodes_to_numpy=False)
            obs = [o[OBS_KEY] for o in obs]
        per_agent.append(np.asarray(obs, dtype=np.float32).reshape(n, -1))
    return np.concatenate(per_agent, axis=1)


def agent_state_rows(joint: np.ndarray, own: int, n_agents: int, t_started: int, horizon: int) -> np.ndarray:
    """``s_i(t) = [o_1(t)..o_N(t), onehot(i), t/T]`` for the rows of one agent episode."""
    n = joint.shape[0]
    own_id = np.repeat(np.eye(n_agents, dtype=np.float32)[own][None], n, axis=0)
    t = (t_started + np.arange(n, dtype=np.float32)) / max(int(horizon), 1)
    return np.concatenate([joint, own_id, t[:, None]], axis=1).astype(np.float32)


@dataclass
class _Joint:
    team_reward: np.ndarray
    observations: np.ndarray | None
    actions: dict[str, np.ndarray]


class AddJointColumns(ConnectorV2):
    """Adds the joint columns the flags ask for (module docstring), aligned with each agent's rows."""

    def __init__(
        self,
        *args: Any,
        agents: Sequence[str],
        horizon: int,
        action_spaces: Mapping[str, gym.Space] | None = None,
        with_state: bool = False,
        with_team: bool = False,
        with_others_actions: bool = False,
        with_replay: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.agents = list(agents)
        self.horizon = max(int(horizon), 1)
        self.action_spaces = dict(action_spaces or {})
        self.with_state = with_state
        self.with_team = with_team
        self.with_others_actions = with_others_actions
        self.with_replay = with_replay
        self._slices: dict[str, slice] = {}
        if with_others_actions:
            offset = 0
            for a in self.agents:
                n = sum(action_logit_lens(self.action_spaces[a]))
                self._slices[a] = slice(offset, offset + n)
                offset += n

    def __call__(
        self,
        *,
        rl_module: RLModule,
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
            if self.with_team:
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

    def _add(self, batch: dict[str, Any], column: str, items: np.ndarray, sa: SingleAgentEpisode) -> None:
        self.add_n_batch_items(batch, column, items, num_items=len(items), single_agent_episode=sa)

    def _joint(self, ma: MultiAgentEpisode) -> _Joint:
        episodes = {}
        for aid in self.agents:
            sa = ma.agent_episodes.get(aid)
            if sa is None:
                raise NotSimultaneousError(
                    f"agent {aid} did not act in an episode chunk: joint columns need every agent "
                    "to act at every env step"
                )
            episodes[aid] = sa
        lengths = {len(sa) for sa in episodes.values()}
        if len(lengths) != 1:
            raise NotSimultaneousError(
                f"agents took different numbers of steps {sorted(lengths)} in one episode chunk: "
                "joint columns need every agent to act at every env step"
            )
        n = lengths.pop()
        rewards = np.stack([np.asarray(sa.get_rewards(slice(0, n)), np.float32) for sa in episodes.values()])
        observations = stacked_observations(list(episodes.values()), n) if self.with_state else None
        actions = {}
        if self.with_others_actions:
            actions = {
                aid: one_hot_actions(np.asarray(sa.get_actions(slice(0, n))), self.action_spaces[aid])
                for aid, sa in episodes.items()
            }
        return _Joint(team_reward=rewards.mean(axis=0), observations=observations, actions=actions)

    @staticmethod
    def _replay(ma: MultiAgentEpisode, aid: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The agent's replay delta on its final action's row. The env runner stores the record at
        the episode's end, so only the chunk that ends the episode carries it; its last row
        (``n - 1``) is the artificial bootstrap step, so the final action is row ``n - 2``."""
        delta = np.full(n, np.nan, dtype=np.float32)
        family = np.full(n, -1, dtype=np.int64)
        record = (ma.custom_data.get(REPLAY_KEY) or {}).get(aid)
        if record is not None and n > 1:
            delta[n - 2], family[n - 2] = record[0], record[1]
        return delta, family


class JointColumns:
    """A picklable learner-connector factory for :class:`AddJointColumns` (RLlib calls it with the
    spaces when it builds the learner pipeline)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs

    def __call__(
        self, input_observation_space: Any = None, input_action_space: Any = None, **kwargs: Any
    ) -> list:
        return [AddJointColumns(input_observation_space, input_action_space, **self.kwargs)]
