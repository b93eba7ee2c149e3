"""NeuroMAS' per-agent counterfactual credit: LEMON's re-execution inside the one network.

The team network is trained on one shared reward, so by default every agent's components get the
same advantage. With ``credit: counterfactual`` each env agent gets its own, from exact
re-executions of the episode with only that agent's action swapped (for Text2SQL one SQLite query,
milliseconds). COMA's counterfactual advantage (Foerster et al., AAAI 2018, Eq. 4),

    A_i(s, u) = Q(s, u) - sum_{u'_i} pi_i(u'_i | s) Q(s, (u_-i, u'_i)),

with Q the executed reward of a one-step episode (exact, no critic) and the sum split into the
action taken and the others, estimated from ``K`` alternatives drawn from the agent's own policy
conditioned on differing from it (LEMON's ``alternative`` edit,
:func:`~orchestrl.algorithms.lemon.replay.alternative_action`):

    b_i = p_i R(u) + (1 - p_i) (1/K) sum_k R(u_-i, u_i^k),   u_i^k ~ pi_i(. | u'_i != u_i)
    A_i = R(u) - b_i = (1 - p_i) (R(u) - (1/K) sum_k R(u_-i, u_i^k))

where ``p_i = pi_i(u_i | s)``. With sequential decisions the composer's policy is the one
conditioned on the extractor's action it saw; an edit keeps the other agent's action as it was.

Three pieces, each doing one thing:

- :class:`TeamCreditCallbacks` (env runner, where the env lives): at each training episode's end,
  draws the alternatives from the action-distribution inputs the runner stored, asks the env
  (:class:`~orchestrl.algorithms.neuromas.team_env.NeuromasTeamEnv`, which forwards to the env's
  counterfactual API) for their rewards and leaves ``[A_1, ..., A_n]`` in the episode;
- :class:`AddTeamCredit` (learner connector): puts them on the final action's row, NaN elsewhere;
- the learner's loss (:func:`.learner.joint_loss`) gives agent i's components advantage ``A_i``
  where the row has one, the shared advantage elsewhere.

One-step episodes only (``configure_neuromas`` refuses others): a later step's reward would need
the episode replayed from that step.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.lemon.replay import (
    CF_METRIC,
    alternative_action,
    counterfactual_env,
    runner_rng,
    softmax,
)
from orchestrl.algorithms.neuromas.team_env import TEAM
from orchestrl.envs.counterfactual import CounterfactualEnv, Edit

if TYPE_CHECKING:
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

TEAM_CREDIT_KEY = "neuromas_team_credit"
"""``MultiAgentEpisode.custom_data`` key: the per-agent counterfactual advantages, set on the runner."""
AGENT_ADVANTAGES = "neuromas_agent_advantages"
"""Train-batch column: (B, env agents) counterfactual advantages; NaN on rows without."""


@dataclass(frozen=True)
class TeamCreditSettings:
    """What the runner side needs: the env agents in team-action order, their components' sizes,
    and how many alternatives to re-execute per agent."""

    agents: tuple[str, ...]
    nvecs: tuple[tuple[int, ...], ...]
    alternatives: int


def counterfactual_advantages(
    env: CounterfactualEnv,
    spec: Any,
    dist_inputs: np.ndarray,
    action: np.ndarray,
    settings: TeamCreditSettings,
    rng: np.random.Generator,
) -> tuple[list[float], int]:
    """``[A_1, ..., A_n]`` for the episode ``spec`` (module docstring) and the re-executions made.
    ``dist_inputs``/``action``: the team's logits and action at the final step (env components
    first, in ``settings.agents`` order; message tokens after them are ignored)."""
    advantages, runs = [], 0
    logit_at = action_at = 0
    for agent, nvec in zip(settings.agents, settings.nvecs, strict=True):
        logits = np.asarray(dist_inputs[logit_at : logit_at + sum(nvec)], dtype=np.float64)
        own = np.asarray(action[action_at : action_at + len(nvec)], dtype=np.int64)
        logit_at, action_at = logit_at + sum(nvec), action_at + len(nvec)
        parts = np.split(logits, np.cumsum(nvec)[:-1])
        p = float(np.prod([softmax(part)[u] for part, u in zip(parts, own, strict=True)]))
        rewards, base = [], None
        for _ in range(settings.alternatives):
            other = alternative_action(logits, own, nvec, rng)
            if other is None:  # the agent's policy puts all its mass on what it did
                break
            outcome = env.counterfactual(spec, agent, Edit.alternative(other))
            rewards.append(outcome.reward)
            base = outcome.base_reward
            runs += 1
        advantages.append(0.0 if base is None else (1.0 - p) * (base - float(np.mean(rewards))))
    return advantages, runs


class TeamCreditCallbacks(RLlibCallback):
    """Env-runner side: the per-agent advantages at each training episode's end. RLlib builds
    callbacks with no arguments in each runner's process: register :meth:`with_settings`."""

    def __init__(self, settings: TeamCreditSettings | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.rng: np.random.Generator | None = None

    @classmethod
    def with_settings(cls, settings: TeamCreditSettings) -> Callable[[], TeamCreditCallbacks]:
        """A no-argument factory of these callbacks (a ``functools.partial``: it pickles by
        reference, so it reaches remote env runners)."""
        return functools.partial(cls, settings)

    def on_episode_end(
        self,
        *,
        episode: MultiAgentEpisode,
        env_runner: Any = None,
        env: Any = None,
        env_index: int = 0,
        metrics_logger: Any = None,
        **kwargs: Any,
    ) -> None:
        if env_runner is None or env is None or env_runner.config.in_evaluation:
            return
        if self.settings is None:
            raise ValueError(
                "TeamCreditCallbacks has no settings: register TeamCreditCallbacks.with_settings(...)"
            )
        if self.rng is None:
            self.rng = runner_rng(env_runner)
        team_env = counterfactual_env(env, env_index)
        spec = team_env.counterfactual_spec()
        if spec is None:
            return
        sa = episode.agent_episodes[TEAM]
        started = time.perf_counter()
        advantages, runs = counterfactual_advantages(
            team_env,
            spec,
            np.asarray(sa.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS, -1)),
            np.asarray(sa.get_actions(-1)).reshape(-1),
            self.settings,
            self.rng,
        )
        episode.custom_data[TEAM_CREDIT_KEY] = advantages
        if metrics_logger is not None:
            metrics_logger.log_value(CF_METRIC + "executions", float(runs), reduce="sum")
            metrics_logger.log_value(CF_METRIC + "time_s", time.perf_counter() - started, reduce="sum")
            metrics_logger.log_value(CF_METRIC + "episodes", 1.0, reduce="sum")


def on_final_action(n: int, value: Any, shape: tuple[int, ...] = ()) -> np.ndarray:
    """One episode chunk's rows of a learner-batch column: ``value`` on its final action's row (the
    chunk's last row is RLlib's artificial bootstrap step, so the action is the row before it), NaN
    on every other row, and on every row when ``value`` is None."""
    column = np.full((n, *shape), np.nan, dtype=np.float32)
    if value is not None and n > 1:
        column[n - 2] = value
    return column


class AddTeamCredit(ConnectorV2):
    """Learner connector: the runner's per-agent advantages on the row of the episode's final action
    (:func:`on_final_action`), NaN on every other row."""

    def __init__(self, *args: Any, agents: Sequence[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.n_agents = len(agents)

    def __call__(
        self, *, rl_module: Any, batch: dict[str, Any], episodes: list[MultiAgentEpisode], **kwargs: Any
    ) -> Any:
        by_id = {ep.id_: ep for ep in episodes}
        for sa in self.single_agent_episode_iterator(episodes, agents_that_stepped_only=False):
            credit = by_id[sa.multi_agent_episode_id].custom_data.get(TEAM_CREDIT_KEY)
            column = on_final_action(len(sa), credit, (self.n_agents,))
            self.add_n_batch_items(
                batch, AGENT_ADVANTAGES, column, num_items=len(sa), single_agent_episode=sa
            )
        return batch


class TeamCreditColumns:
    """A picklable learner-connector factory for :class:`AddTeamCredit`."""

    def __init__(self, agents: Sequence[str]) -> None:
        self.agents = list(agents)

    def __call__(
        self, input_observation_space: Any = None, input_action_space: Any = None, **kwargs: Any
    ) -> list:
        return [AddTeamCredit(input_observation_space, input_action_space, agents=self.agents)]
