"""LEMON's runner side: at each episode's end, one edit per agent, re-executed through the env.

The learner holds no env, so deltas are computed where the env lives: in the env runner's
``on_episode_end`` callback. It replays the spec the episode's final step executed (the env's
``counterfactual_spec()``), so each delta is the credit of the agent's FINAL action, and the
learner puts it on that action's row only (:class:`~orchestrl.algorithms.joint_columns.AddJointColumns`).
An episode whose final spec was invalid gets no replay (an earlier round's spec is not what the
final actions wrote); those are counted as ``env/cf_invalid_final``. For every agent it samples an
edit family (adaptively, by each family's recent |delta|, with a probability floor), builds the
edit (for ``alternative``: an action sampled from the agent's own policy, from the
action-distribution inputs the runner stored in the episode for that final step; the env decodes
the team's final actions again with it swapped in, so the agents after it respond to it), calls
``env.counterfactual(spec, agent, edit)`` and stores ``delta = R(spec) - R(edited)`` in
``episode.custom_data``, which travels with the episode to the learner. Extra executions and their
wall time are logged as ``env/cf_*`` metrics.

Its settings arrive as one :class:`ReplaySettings`, built once from the experiment's ``LemonConfig``
(where the keys, their defaults and their bounds live) and bound to the callbacks class RLlib
instantiates in each env runner (:meth:`ReplayCallbacks.with_settings`): they travel with the
RLlib config to env runners in other processes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.actor_critic import action_logit_lens
from orchestrl.algorithms.joint_columns import REPLAY_KEY
from orchestrl.envs.counterfactual import (
    EDIT_FAMILIES,
    CounterfactualEnv,
    Edit,
    EditFamily,
    EditNotApplicable,
    NoCounterfactualAPIError,
    supports_counterfactual,
)

if TYPE_CHECKING:
    from ray.rllib.core.rl_module.rl_module import RLModule
    from ray.rllib.env.env_runner import EnvRunner
    from ray.rllib.env.multi_agent_episode import MultiAgentEpisode

CF_METRIC = "env/cf_"


@dataclass(frozen=True)
class ReplaySettings:
    """The runner side's settings: which edit families to sample, and how.

    Built from the experiment's knobs by ``LemonConfig.replay_settings()``; the YAML keys, their
    defaults and their bounds are ``LemonConfig``'s (``edit_families``, ``family_floor``,
    ``family_decay``), stated nowhere else.
    """

    families: tuple[EditFamily, ...]
    """The edit families to sample from."""
    floor: float
    """Minimum probability of each family (see :func:`family_probabilities`)."""
    decay: float
    """EMA decay of each family's recent |delta| (and of each agent's delta statistics)."""
    agents: int | None = None
    """At most this many agents' edits replayed per episode, chosen by :class:`AgentChooser`
    (None: every agent's, as LEMON)."""


def family_probabilities(recent_abs_delta: Sequence[float], floor: float) -> np.ndarray:
    """LEMON's adaptive edit-family sampling: proportional to each family's recent |delta|, with
    a floor so no family starves,

        p_f = floor + (1 - F * floor) * m_f / sum_g m_g         (F families, floor <= 1/F)

    where m_f is an exponential moving average of |delta| of family f's edits (uniform when all
    are 0).
    """
    m = np.maximum(np.asarray(recent_abs_delta, dtype=np.float64), 0.0)
    n = len(m)
    floor = min(float(floor), 1.0 / n)
    share = m / m.sum() if m.sum() > 0 else np.full(n, 1.0 / n)
    return floor + (1.0 - n * floor) * share


class FamilySampler:
    """Keeps each family's recent |delta| (an EMA) and samples families by :func:`family_probabilities`."""

    def __init__(
        self, families: Sequence[EditFamily], floor: float, decay: float, rng: np.random.Generator
    ) -> None:
        self.families = [EditFamily(f) for f in families]
        self.floor = floor
        self.decay = decay
        self.rng = rng
        self.recent = dict.fromkeys(self.families, 1.0)

    def probabilities(self, applicable: Sequence[EditFamily] | None = None) -> dict[EditFamily, float]:
        pool = [f for f in self.families if applicable is None or f in applicable]
        if not pool:
            return {}
        return dict(zip(pool, family_probabilities([self.recent[f] for f in pool], self.floor), strict=True))

    def sample(self, applicable: Sequence[EditFamily]) -> EditFamily | None:
        probs = self.probabilities(applicable)
        if not probs:
            return None
        families = list(probs)
        return families[int(self.rng.choice(len(families), p=np.fromiter(probs.values(), float)))]

    def update(self, family: EditFamily, abs_delta: float) -> None:
        self.recent[family] = self.decay * self.recent[family] + (1.0 - self.decay) * abs(abs_delta)


class AgentChooser:
    """Which agents' edits an episode replays when it may replay only ``k``: drawn without
    replacement, each with a probability that follows the information its recent deltas carried,

        p_i = floor + (1 - N * floor) * s_i / sum_j s_j,   s_i = EMA |delta_i - mu_i|,   mu_i = EMA delta_i

    (:func:`family_probabilities` over the N agents; uniform until deltas arrive). The learner
    centres each agent's delta by its running mean (``DeltaBaseline``), so an agent whose edits
    always move the reward by the same amount gets no credit from them: its replays are the ones
    to spend elsewhere. The floor keeps every agent's turn coming. An agent not chosen keeps the
    team advantage on its row (``lemon_advantages``)."""

    def __init__(self, k: int, floor: float, decay: float, rng: np.random.Generator) -> None:
        self.k = k
        self.floor = floor
        self.decay = decay
        self.rng = rng
        self.mean: dict[str, float] = {}
        self.spread: dict[str, float] = {}

    def probabilities(self, agents: Sequence[str]) -> np.ndarray:
        return family_probabilities([self.spread.get(a, 1.0) for a in agents], self.floor)

    def choose(self, agents: Sequence[str]) -> list[str]:
        """``k`` of ``agents`` (all of them when there are no more), in their given order."""
        if self.k >= len(agents):
            return list(agents)
        picked = self.rng.choice(len(agents), size=self.k, replace=False, p=self.probabilities(agents))
        return [agents[i] for i in sorted(picked)]

    def update(self, agent: str, delta: float) -> None:
        mean = self.mean.get(agent)
        if mean is None:  # the first delta sets the mean; the spread starts from 1
            self.mean[agent] = float(delta)
            return
        d = self.decay
        self.spread[agent] = d * self.spread.get(agent, 1.0) + (1.0 - d) * abs(float(delta) - mean)
        self.mean[agent] = d * mean + (1.0 - d) * float(delta)


@dataclass(frozen=True)
class ReplayRecord:
    agent: str
    family: EditFamily
    delta: float
    edited_reward: float
    seconds: float
    terms: Mapping[str, float]


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max())
    return z / z.sum()


def alternative_action(
    dist_inputs: np.ndarray, actual: Any, logit_lens: Sequence[int], rng: np.random.Generator
) -> Any | None:
    """An action drawn from the agent's own policy conditioned on differing from ``actual``,
    ``pi(a | a != actual)``, exactly and without rejection; None when no other action has
    probability > 0. Masked logits (-1e9) get probability 0.

    With a factorised policy pi(a) = prod_k p_k(a_k) and q_k = p_k(actual_k), the first component
    that differs is k with probability proportional to (prod_{j<k} q_j) (1 - q_k); then a_k is
    drawn from p_k without actual_k, the earlier components stay as they were and the later ones
    are drawn freely. One component (Discrete) reduces to p without the actual action, renormalised.
    """
    parts = np.split(np.asarray(dist_inputs, dtype=np.float64), np.cumsum(logit_lens)[:-1])
    probs = [softmax(p) for p in parts]
    actual_arr = np.asarray(actual, dtype=np.int64).reshape(-1)
    q = np.array([p[u] for p, u in zip(probs, actual_arr, strict=True)])
    first_differs = np.concatenate([[1.0], np.cumprod(q)[:-1]]) * (1.0 - q)
    if first_differs.sum() <= 1e-12:
        return None
    k = int(rng.choice(len(q), p=first_differs / first_differs.sum()))
    out = actual_arr.copy()
    other = probs[k].copy()
    other[actual_arr[k]] = 0.0
    out[k] = rng.choice(len(other), p=other / other.sum())
    for j in range(k + 1, len(probs)):
        out[j] = rng.choice(len(probs[j]), p=probs[j])
    return int(out[0]) if np.ndim(actual) == 0 else out


def replay_episode(
    env: CounterfactualEnv,
    spec: Any,
    episode: MultiAgentEpisode,
    sampler: FamilySampler,
    logit_lens: Mapping[str, Sequence[int]],
    rng: np.random.Generator,
    chooser: AgentChooser | None = None,
) -> list[ReplayRecord]:
    """One edit per agent on ``spec``, the spec the episode's final step executed;
    ``delta = R(spec) - R(edited)``. The ``alternative`` edit is drawn from the policy of that same
    final step. With a ``chooser``, only the agents it chooses (:class:`AgentChooser`)."""
    records = []
    everyone = sorted(episode.agent_episodes)
    chosen = everyone if chooser is None else chooser.choose(everyone)
    for agent in chosen:
        sa = episode.agent_episodes[agent]
        applicable = [f for f in env.counterfactual_edits(spec, agent) if f in sampler.families]
        started = time.perf_counter()  # includes attempts the env turns down as not applicable
        while applicable:
            family = sampler.sample(applicable)
            action = None
            if family is EditFamily.ALTERNATIVE:
                action = alternative_action(
                    sa.get_extra_model_outputs(Columns.ACTION_DIST_INPUTS, -1),
                    sa.get_actions(-1),
                    logit_lens[agent],
                    rng,
                )
                if action is None:
                    applicable.remove(family)
                    continue
            edge = int(rng.integers(1 << 30)) if family is EditFamily.DROP_EDGE else -1  # uniform over edges
            try:
                outcome = env.counterfactual(spec, agent, Edit(family, action, edge))
            except EditNotApplicable:
                applicable.remove(family)
                continue
            seconds = time.perf_counter() - started
            sampler.update(family, abs(outcome.delta))
            if chooser is not None:
                chooser.update(agent, outcome.delta)
            records.append(
                ReplayRecord(agent, family, outcome.delta, outcome.reward, seconds, dict(outcome.terms))
            )
            break
    return records


def runner_rng(env_runner: EnvRunner) -> np.random.Generator:
    """A replay generator of its own per env runner: the experiment's seed and the runner's index."""
    seed = (env_runner.config.seed or 0) * 1000 + int(getattr(env_runner, "worker_index", 0) or 0)
    return np.random.default_rng(seed)


def counterfactual_env(vector_env: Any, env_index: int) -> Any:
    """The PettingZoo env behind sub-env ``env_index`` of an env runner's vector env."""
    sub = vector_env.envs[env_index].unwrapped
    raw = getattr(sub, "raw_env", None) or getattr(sub, "par_env", None) or sub
    return getattr(raw, "unwrapped", raw)


class ReplayCallbacks(RLlibCallback):
    """Env-runner side of LEMON: computes the deltas at each (training) episode's end.

    RLlib instantiates each callbacks class with no arguments, in every env runner's own process:
    hand it the class bound to its settings, :meth:`with_settings`.
    """

    def __init__(self, settings: ReplaySettings | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.sampler: FamilySampler | None = None
        self.chooser: AgentChooser | None = None
        self.rng: np.random.Generator | None = None

    @classmethod
    def with_settings(cls, settings: ReplaySettings) -> Callable[[], ReplayCallbacks]:
        """What ``config.callbacks(callbacks_class=[...])`` takes: a no-argument factory of these
        callbacks with ``settings`` (a ``functools.partial``: it pickles by reference, so it reaches
        remote env runners and checkpoints as the class and the settings)."""
        return functools.partial(cls, settings)

    def _setup(self, env_runner: EnvRunner) -> None:
        if self.settings is None:
            raise ValueError(
                "ReplayCallbacks has no ReplaySettings: register ReplayCallbacks.with_settings(...) "
                "as the callbacks class (see configure_lemon)"
            )
        self.rng = runner_rng(env_runner)
        settings = self.settings
        self.sampler = FamilySampler(settings.families, settings.floor, settings.decay, self.rng)
        if settings.agents is not None:
            self.chooser = AgentChooser(settings.agents, settings.floor, settings.decay, self.rng)

    def on_episode_end(
        self,
        *,
        episode: MultiAgentEpisode,
        env_runner: EnvRunner | None = None,
        env: Any = None,
        env_index: int = 0,
        rl_module: RLModule | None = None,
        metrics_logger: Any = None,
        **kwargs: Any,
    ) -> None:
        if env_runner is None or env is None or env_runner.config.in_evaluation:
            return
        cf_env = counterfactual_env(env, env_index)
        if not supports_counterfactual(cf_env):
            raise NoCounterfactualAPIError(
                f"{type(cf_env).__name__} has no counterfactual API "
                "(counterfactual_spec/_edits/counterfactual)"
            )
        if self.sampler is None:
            self._setup(env_runner)
        lens = {a: action_logit_lens(episode.agent_episodes[a].action_space) for a in episode.agent_episodes}
        spec = cf_env.counterfactual_spec()
        records = []
        if spec is not None:
            records = replay_episode(cf_env, spec, episode, self.sampler, lens, self.rng, self.chooser)
        episode.custom_data[REPLAY_KEY] = {r.agent: (r.delta, EDIT_FAMILIES.index(r.family)) for r in records}
        if metrics_logger is not None:
            log_replay_metrics(metrics_logger, records, self.sampler, invalid_final=spec is None)


def log_replay_metrics(
    metrics_logger: Any, records: Sequence[ReplayRecord], sampler: FamilySampler, invalid_final: bool = False
) -> None:
    """Extra executions and their time, episodes and those without a final spec to replay (summed
    per iteration), and the family probabilities."""
    executions = sum(r.terms.get("executions", 1.0) for r in records)  # 0: priced without running
    metrics_logger.log_value(CF_METRIC + "executions", float(executions), reduce="sum")
    metrics_logger.log_value(CF_METRIC + "time_s", float(sum(r.seconds for r in records)), reduce="sum")
    metrics_logger.log_value(CF_METRIC + "episodes", 1.0, reduce="sum")
    metrics_logger.log_value(CF_METRIC + "invalid_final", float(invalid_final), reduce="sum")
    for term in ("nodes_run", "cache_hits"):
        if any(term in r.terms for r in records):
            metrics_logger.log_value(
                CF_METRIC + term, sum(r.terms.get(term, 0.0) for r in records), reduce="sum"
            )
    for family, p in sampler.probabilities().items():
        metrics_logger.log_value(f"{CF_METRIC}p_{family.value}", p, reduce="mean", window=1)
    for r in records:
        metrics_logger.log_value(
            f"{CF_METRIC}abs_delta_{r.family.value}", abs(r.delta), reduce="mean", window=100
        )
