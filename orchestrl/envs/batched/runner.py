"""RLlib's ``MultiAgentEnvRunner`` for envs that step all their copies as one tensor operation.

Why a runner and not only an env: RLlib 2.60's ``MultiAgentEnvRunner`` builds every vector env as a
``SyncVectorMultiAgentEnv`` of single envs (``make_vec`` has no other multi-agent mode), and its
``_sample`` loop spends Python on every copy at every step (an episode ``add_env_step``, a dozen
metric logs, per-agent connector passes and action un-batching), whatever the env costs.
``benchmarks/throughput.py`` measures that cost on the batched env itself
(``batched_rllib_stepping_env_steps_per_s``).

:class:`BatchedEnvRunner` is that runner with two seams used:

- ``make_env``: an env whose registry entry names a ``vector_factory`` is built as ONE vector env
  of ``num_envs_per_env_runner`` copies (any other env: RLlib's own ``make_env``);
- ``_sample``: for such an env, each step is one module forward over all copies and agents (per
  module), the action distribution sampled as RLlib's ``GetActions`` does, and one tensor env step.
  Steps are kept as tensors; at the end of the call each copy's episode chunks are built at once as
  ordinary ``MultiAgentEpisode`` objects (numpy data, no lookback buffer), and the runner's
  metrics and ``on_episode_end`` callbacks are fed as RLlib's loop feeds them. Learner connectors,
  learners, weight sync and checkpoints see nothing different.

RLlib's own ``_sample`` runs instead (the env's list interface, one dict per copy) when the fast path
would drop something RLlib's does: custom env-to-module or module-to-env connectors, stateful
(recurrent) modules, random actions, or ``env_config["rllib_stepping"] = True``. The fast path calls
``policy_mapping_fn`` once per agent (not per episode), so the mapping must not depend on the
episode; it calls no ``on_episode_created/start/step`` callbacks.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
import torch
from ray.rllib.callbacks.utils import make_callback
from ray.rllib.core.columns import Columns
from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
from ray.rllib.env.multi_agent_episode import MultiAgentEpisode
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.env.utils.infinite_lookback_buffer import InfiniteLookbackBuffer
from ray.rllib.utils.metrics import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_SAMPLED_LIFETIME,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_EPISODES,
    NUM_EPISODES_LIFETIME,
    NUM_MODULE_STEPS_SAMPLED,
    NUM_MODULE_STEPS_SAMPLED_LIFETIME,
    WEIGHTS_SEQ_NO,
)
from ray.rllib.utils.metrics.metrics_logger import MetricsLogger

from orchestrl.dotted import load
from orchestrl.envs.registry import ENVS


class TensorStep(NamedTuple):
    """One step of every copy of a :class:`TensorVectorEnv`."""

    obs: dict[str, torch.Tensor]
    """Each agent's ``[N, D]`` observation after the step (an ended copy's last one)."""
    rewards: torch.Tensor
    """``[N, A]`` float32, agents in ``possible_agents`` order."""
    terminated: torch.Tensor
    """``[N]`` bool."""
    truncated: torch.Tensor
    """``[N]`` bool."""
    next_obs: dict[str, torch.Tensor]
    """What each copy's next action sees: ``obs``, except for ended copies, already reset."""


@runtime_checkable
class TensorVectorEnv(Protocol):
    """A vector env whose copies step together as tensors; every agent acts at every step."""

    num_envs: int
    possible_agents: list[str]

    def reset_tensors(self, seed: int | None = None) -> dict[str, torch.Tensor]: ...

    def step_tensors(self, actions: dict[str, torch.Tensor]) -> TensorStep: ...


@dataclass
class _Chunk:
    """One episode chunk of one copy: steps ``[first, last]`` of this sample call."""

    copy: int
    first: int
    last: int
    episode_id: str
    agent_episode_ids: dict[str, str]
    env_t_started: int
    terminated: bool = False
    truncated: bool = False


class BatchedEnvRunner(MultiAgentEnvRunner):
    """``MultiAgentEnvRunner`` that steps a :class:`TensorVectorEnv` in bulk (module docstring)."""

    def make_env(self) -> None:
        factory = _vector_factory(self.config.env_config)
        if factory is None:
            super().make_env()
            return
        if self.env is not None:
            self.env.close()
        env_config = dict(self.config.env_config)
        entry = ENVS[env_config["name"]]
        kwargs = {**entry.defaults, **env_config.get("kwargs", {})}
        self.env = load(factory)(
            num_envs=self.config.num_envs_per_env_runner,
            agent_id_in_obs=bool(env_config.get("agent_id_in_obs", False)),
            **kwargs,
        )
        self.num_envs = self.env.num_envs
        self._needs_initial_reset = True
        self._bulk_state: dict[str, Any] = {}
        self._callback("on_environment_created", env=self.env, env_context=self.config.env_config)

    def get_metrics(self) -> Any:
        """RLlib's metrics, from only the finished episodes its windows keep.

        RLlib logs every finished episode's length and returns into windows of the last
        ``metrics_num_episodes_for_smoothing / num_env_runners`` episodes, one episode at a time; with
        hundreds of copies most of those values are pushed out of the window in the same call. The
        older ones are dropped first (with their earlier chunks), so the reported figures are the same.
        """
        win = max(
            1,
            math.ceil(self.config.metrics_num_episodes_for_smoothing / (self.config.num_env_runners or 1)),
        )
        older = self._done_episodes_for_metrics[:-win]
        for ep in older:
            self._ongoing_episodes_for_metrics.pop(ep.id_, None)
        del self._done_episodes_for_metrics[:-win]
        return super().get_metrics()

    # Which loop runs.

    def _bulk_ok(self, random_actions: bool) -> bool:
        if random_actions or not isinstance(self.env, TensorVectorEnv) or self.module is None:
            return False
        if dict(self.config.env_config).get("rllib_stepping", False):
            return False
        cfg = self.config
        if cfg._env_to_module_connector is not None or cfg._module_to_env_connector is not None:
            return False
        return not self.module.is_stateful()

    def _sample(
        self,
        *,
        num_timesteps: int | None = None,
        num_episodes: int | None = None,
        explore: bool,
        random_actions: bool = False,
        force_reset: bool = False,
    ) -> list[MultiAgentEpisode]:
        if not self._bulk_ok(random_actions):
            return super()._sample(
                num_timesteps=num_timesteps,
                num_episodes=num_episodes,
                explore=explore,
                random_actions=random_actions,
                force_reset=force_reset,
            )
        return self._sample_bulk(
            num_timesteps=num_timesteps, num_episodes=num_episodes, explore=explore, force_reset=force_reset
        )

    # The bulk loop.

    def _sample_bulk(
        self, *, num_timesteps: int | None, num_episodes: int | None, explore: bool, force_reset: bool
    ) -> list[MultiAgentEpisode]:
        env: TensorVectorEnv = self.env  # type: ignore[assignment]
        n, agents = env.num_envs, list(env.possible_agents)
        st = self._bulk_state
        if force_reset or num_episodes is not None or self._needs_initial_reset or not st:
            st["obs"] = env.reset_tensors(seed=self._seed if self._needs_initial_reset else None)
            st["chunks"] = [self._new_chunk(i, 0) for i in range(n)]
            st["modules"] = self._agent_modules(agents)
            self._ongoing_episodes_for_metrics.clear()
            self._needs_initial_reset = False
        if num_episodes is not None:
            self._needs_initial_reset = True
        obs, open_chunks, modules = st["obs"], st["chunks"], st["modules"]
        for c in open_chunks:
            c.first = 0

        record: dict[str, list] = defaultdict(list)
        extras: dict[str, list[dict[str, torch.Tensor]]] = {a: [] for a in agents}
        closed: list[_Chunk] = []
        step, env_ts, lifetime = 0, 0, self.num_env_steps_sampled_lifetime
        while (len(closed) < num_episodes) if num_episodes is not None else (env_ts < num_timesteps):
            t = (lifetime // (self.config.num_env_runners or 1) + env_ts) * (self.config.num_env_runners or 1)
            actions, outs = self._act(obs, modules, explore, t)
            result = env.step_tensors(actions)
            for a in agents:
                record["obs_" + a].append(obs[a])
                record["last_" + a].append(result.obs[a])
                record["act_" + a].append(actions[a])
                extras[a].append(outs[a])
            record["rewards"].append(result.rewards)
            ended = (result.terminated | result.truncated).nonzero().flatten().tolist()
            if ended:
                term = result.terminated.tolist()
                for i in ended:
                    chunk = open_chunks[i]
                    chunk.last, chunk.terminated, chunk.truncated = step, bool(term[i]), not term[i]
                    closed.append(chunk)
                    open_chunks[i] = self._new_chunk(i, step + 1)
            obs = result.next_obs
            step += 1
            env_ts += n
        st["obs"] = obs

        if num_episodes is not None:
            closed = closed[:num_episodes]
            ongoing: list[_Chunk] = []
        else:
            ongoing = [c for c in open_chunks if c.first < step]
            for c in ongoing:
                c.last = step - 1
        data = self._stack(record, extras, agents)
        done = [self._episode(c, data, agents, modules) for c in closed]
        cont = [self._episode(c, data, agents, modules) for c in ongoing]
        for c in ongoing:  # the chunk that continues in the next call
            c.env_t_started += c.last - c.first + 1
        for ep in done:
            self._callback(
                "on_episode_end",
                episode=ep,
                env=self.env,
                rl_module=self.module,
                env_index=0,
                prev_episode_chunks=self._ongoing_episodes_for_metrics[ep.id_],
            )
        for ep in cont:
            self._ongoing_episodes_for_metrics[ep.id_].append(ep)
        self._done_episodes_for_metrics.extend(done)
        self._count(
            env_ts if num_episodes is None else sum(len(e) for e in done + cont), len(done), agents, modules
        )
        return done + cont

    def _act(
        self, obs: dict[str, torch.Tensor], modules: dict[str, list[str]], explore: bool, t: int
    ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
        """One forward per module over all copies of all its agents, then RLlib's ``GetActions``:
        sample the action distribution (its deterministic version without exploration)."""
        batch = {mid: {Columns.OBS: torch.cat([obs[a] for a in members])} for mid, members in modules.items()}
        with torch.no_grad():
            if explore:
                out = self.module.forward_exploration(batch, t=t)
            else:
                out = self.module.forward_inference(batch)
            actions: dict[str, torch.Tensor] = {}
            extras: dict[str, dict[str, torch.Tensor]] = {}
            for mid, members in modules.items():
                mod_out, module = dict(out[mid]), self.module[mid]
                rows = batch[mid][Columns.OBS].shape[0]
                if Columns.ACTIONS not in mod_out:
                    cls = (
                        module.get_exploration_action_dist_cls()
                        if explore
                        else module.get_inference_action_dist_cls()
                    )
                    dist = cls.from_logits(mod_out[Columns.ACTION_DIST_INPUTS])
                    if not explore:
                        dist = dist.to_deterministic()
                    mod_out[Columns.ACTIONS] = dist.sample()
                    if Columns.ACTION_LOGP not in mod_out:
                        mod_out[Columns.ACTION_LOGP] = dist.logp(mod_out[Columns.ACTIONS])
                keep = {
                    k: v
                    for k, v in mod_out.items()
                    if k != Columns.ACTIONS and isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == rows
                }
                for a, act in zip(members, mod_out[Columns.ACTIONS].chunk(len(members)), strict=True):
                    actions[a] = act
                for k, v in keep.items():
                    for a, part in zip(members, v.chunk(len(members)), strict=True):
                        extras.setdefault(a, {})[k] = part
        return actions, extras

    # Episodes in bulk.

    @staticmethod
    def _stack(
        record: dict[str, list], extras: dict[str, list[dict[str, torch.Tensor]]], agents: list[str]
    ) -> dict[str, Any]:
        """Copy-major numpy arrays, ``[N, steps, ...]``, of everything recorded."""
        data: dict[str, Any] = {k: torch.stack(v, dim=1).numpy() for k, v in record.items() if k != "rewards"}
        rewards = torch.stack(record["rewards"], dim=1).numpy()  # [N, steps, A]
        data["rewards"] = {a: rewards[:, :, k] for k, a in enumerate(agents)}
        data["extras"] = {
            a: {k: torch.stack([s[k] for s in steps], dim=1).numpy() for k in (steps[0] if steps else {})}
            for a, steps in extras.items()
        }
        return data

    def _episode(
        self, c: _Chunk, data: dict[str, Any], agents: list[str], modules: dict[str, list[str]]
    ) -> MultiAgentEpisode:
        """One chunk as a ``MultiAgentEpisode``, built from arrays rather than step by step.

        Equal to what RLlib's constructor builds from the same per-step dicts with
        ``len_lookback_buffer=0`` (``tests/envs/batched`` checks it); built here directly because that
        constructor re-walks every step and agent in Python.
        """
        i, s, e = c.copy, c.first, c.last + 1
        length = e - s
        module_of = {a: mid for mid, members in modules.items() for a in members}
        env = self.env
        ep = MultiAgentEpisode(
            id_=c.episode_id,
            observation_space=env.single_observation_space,
            action_space=env.single_action_space,
            agent_module_ids=dict(module_of),
            agent_to_module_mapping_fn=self.config.policy_mapping_fn,
            env_t_started=c.env_t_started,
            agent_t_started=dict.fromkeys(agents, c.env_t_started),
            len_lookback_buffer=0,
        )
        seq = np.full(length, self._weights_seq_no)
        for a in agents:
            obs = np.concatenate([data["obs_" + a][i, s:e], data["last_" + a][i, e - 1 : e]])
            extra = {k: v[i, s:e] for k, v in data["extras"][a].items()}
            extra[WEIGHTS_SEQ_NO] = seq
            ep.agent_episodes[a] = SingleAgentEpisode(
                id_=c.agent_episode_ids[a],
                agent_id=a,
                module_id=module_of[a],
                multi_agent_episode_id=c.episode_id,
                observation_space=env.single_observation_spaces[a],
                action_space=env.single_action_spaces[a],
                observations=obs,
                infos=[{} for _ in range(length + 1)],
                actions=data["act_" + a][i, s:e],
                rewards=data["rewards"][a][i, s:e],
                extra_model_outputs=extra,
                terminated=c.terminated,
                truncated=c.truncated,
                t_started=c.env_t_started,
                len_lookback_buffer=0,
            )
            ep.env_t_to_agent_t[a] = InfiniteLookbackBuffer(
                data=list(range(c.env_t_started, c.env_t_started + length + 1)), lookback=0
            )
        ep.env_t = c.env_t_started + length
        ep.is_terminated, ep.is_truncated = c.terminated, c.truncated
        return ep

    def _new_chunk(self, copy: int, first: int) -> _Chunk:
        agents = self.env.possible_agents
        return _Chunk(copy, first, -1, uuid.uuid4().hex, {a: uuid.uuid4().hex for a in agents}, 0)

    def _agent_modules(self, agents: list[str]) -> dict[str, list[str]]:
        """Module id -> its agents, from ``policy_mapping_fn`` asked once per agent."""
        probe = MultiAgentEpisode()
        modules: dict[str, list[str]] = {}
        for a in agents:
            modules.setdefault(self.config.policy_mapping_fn(a, probe), []).append(a)
        return modules

    # Metrics and callbacks, as RLlib's loop reports them.

    def _count(self, env_steps: int, episodes: int, agents: list[str], modules: dict[str, list[str]]) -> None:
        if env_steps <= 0:
            return
        m: MetricsLogger = self.metrics
        m.log_value(NUM_ENV_STEPS_SAMPLED, env_steps, reduce="sum")
        m.log_value(NUM_ENV_STEPS_SAMPLED_LIFETIME, env_steps, reduce="lifetime_sum", with_throughput=True)
        if episodes:
            m.log_value(NUM_EPISODES, episodes, reduce="sum")
            m.log_value(NUM_EPISODES_LIFETIME, episodes, reduce="lifetime_sum")
        for a in agents:
            m.log_value((NUM_AGENT_STEPS_SAMPLED, str(a)), env_steps, reduce="sum")
            m.log_value((NUM_AGENT_STEPS_SAMPLED_LIFETIME, str(a)), env_steps, reduce="lifetime_sum")
        for mid, members in modules.items():
            m.log_value((NUM_MODULE_STEPS_SAMPLED, mid), env_steps * len(members), reduce="sum")
            m.log_value(
                (NUM_MODULE_STEPS_SAMPLED_LIFETIME, mid), env_steps * len(members), reduce="lifetime_sum"
            )
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=env_steps)

    def _callback(self, which: str, **kwargs: Any) -> None:
        make_callback(
            which,
            callbacks_objects=self._callbacks,
            callbacks_functions=getattr(self.config, f"callbacks_{which}"),
            kwargs={"env_runner": self, "metrics_logger": self.metrics, **kwargs},
        )


def _vector_factory(env_config: Any) -> str | None:
    """The registry's ``vector_factory`` of the env named in ``env_config``, if it has one."""
    name = dict(env_config or {}).get("name")
    entry = ENVS.get(name) if isinstance(name, str) else None
    return entry.vector_factory if entry is not None else None
