"""MAPPO's centralised critic input, added to the train batch by a learner ConnectorV2 piece.

The value function of MAPPO (Yu et al., "The Surprising Effectiveness of PPO in Cooperative
Multi-Agent Games", 2022, Sec. 4 "agent-specific global state") sees, for agent i at env step t:

    s_i(t) = [ o_1(t), ..., o_N(t), onehot(i), t / T ]

All agents' observations in a fixed (sorted) agent order, the row's own agent id (so one shared
critic can still value each agent's prospects) and the normalised time step (a fixed-horizon env is
not Markov without it). Actors never see this column: it exists only in the learner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

from orchestrl.algorithms.actor_critic import GLOBAL_STATE
from orchestrl.envs.spaces import OBS_KEY, NotSimultaneousError


def global_state_dim(obs_dims: Sequence[int]) -> int:
    return int(sum(obs_dims)) + len(obs_dims) + 1


def stacked_observations(agent_episodes: Sequence[Any], n: int) -> np.ndarray:
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


class AddGlobalState(ConnectorV2):
    """Adds ``global_state`` rows aligned one-to-one with each agent's observation rows.

    Runs in the learner pipeline after ``AddOneTsToEpisodesAndTruncate``, so every agent episode
    already carries its extra bootstrap step; the joint state at that step repeats the last one.
    """

    def __init__(self, *args: Any, agent_order: Sequence[str], horizon: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent_order = list(agent_order)
        self.horizon = max(int(horizon), 1)

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
        # Same order as ``single_agent_episode_iterator(..., agents_that_stepped_only=False)``,
        # which the default pieces use to add the observation rows this column must line up with.
        for ma_episode in episodes:
            joint = self._joint_observations(ma_episode)
            for aid in ma_episode.agent_ids:
                sa_episode = ma_episode.agent_episodes[aid]
                n = len(sa_episode)
                own = self.agent_order.index(aid)
                state = agent_state_rows(
                    joint, own, len(self.agent_order), sa_episode.t_started, self.horizon
                )
                self.add_n_batch_items(
                    batch, GLOBAL_STATE, state, num_items=n, single_agent_episode=sa_episode
                )
        return batch

    def _joint_observations(self, ma_episode: MultiAgentEpisode) -> np.ndarray:
        episodes = []
        for aid in self.agent_order:
            sa = ma_episode.agent_episodes.get(aid)
            if sa is None:
                raise NotSimultaneousError(f"agent {aid} is missing from an episode chunk")
            episodes.append(sa)
        lengths = {len(sa) for sa in episodes}
        if len(lengths) != 1:
            raise NotSimultaneousError(
                f"agents have different step counts {sorted(lengths)} in one episode chunk: "
                "a centralised critic needs every agent to act at every step"
            )
        return stacked_observations(episodes, lengths.pop())
