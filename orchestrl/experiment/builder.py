"""Turns a typed :class:`ExperimentConfig` into an RLlib (new API stack) ``PPOConfig``.

The builder owns everything algorithm-independent (env, runners, learners, PPO knobs, seeding,
evaluation, fault tolerance, the env's episode reports); the algorithm's entry in
:mod:`orchestrl.experiment.algorithms` then adds its modules, connectors, learner, callbacks and
warm start from its knobs and a :class:`~orchestrl.algorithms.context.BuildContext`. The builder
never names an algorithm.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.rllib.algorithms.ppo import PPOConfig

from orchestrl.algorithms.context import BuildContext
from orchestrl.algorithms.ppo_learner import FastStepPPOLearner
from orchestrl.envs.batched.runner import BatchedEnvRunner
from orchestrl.envs.info import EnvInfo
from orchestrl.envs.registry import get_env
from orchestrl.envs.reporting import EnvReportCallbacks
from orchestrl.envs.rllib_env import RegisteredEnv, env_config
from orchestrl.experiment.algorithms import get_algorithm
from orchestrl.experiment.config import ExperimentConfig

log = logging.getLogger(__name__)

NEVER = 10**9
"""An evaluation interval that never fires (evaluation only at the end of ``train``)."""


def probe_env(cfg: ExperimentConfig) -> EnvInfo:
    """Builds the env once on the driver to read its agents and spaces."""
    env = RegisteredEnv(experiment_env_config(cfg))
    try:
        agents = sorted(env.possible_agents)
        return EnvInfo(
            agents=agents,
            observation_spaces={a: env.observation_space[a] for a in agents},
            action_spaces={a: env.action_space[a] for a in agents},
            horizon=get_env(cfg.env.name).horizon(cfg.env.kwargs),
            name=cfg.env.name,
            kwargs=dict(cfg.env.kwargs),
            agent_id_in_obs=cfg.env.agent_id_in_obs,
            cache_dir=str(cfg.cache_dir(cfg.env.name)),
            option_rows=getattr(env.raw_env, "option_rows", None),
        )
    finally:
        env.close()


def build_ppo_config(
    cfg: ExperimentConfig, *, env: EnvInfo | None = None, gpus_available: float | None = None
) -> PPOConfig:
    """The full RLlib config of an experiment: the base config shaped by its algorithm.

    ``gpus_available``: GPUs in the cluster, when known; with none and ``resources.cpu_fallback``,
    learners that asked for GPUs train on CPU instead of waiting forever for one.
    """
    env = env or probe_env(cfg)
    context = BuildContext(env=env, model=cfg.model, warm_start=cfg.warm_start)
    configure = get_algorithm(cfg.algorithm.name).configure
    knobs = cfg.algorithm.typed_knobs()  # validated once, by validate_config
    return configure(base_ppo_config(cfg, gpus_available=gpus_available), knobs, context)


def base_ppo_config(cfg: ExperimentConfig, *, gpus_available: float | None = None) -> PPOConfig:
    """Everything algorithm-independent: env, runners, learners, PPO knobs, seeding, evaluation."""
    res, tr = cfg.resources, cfg.training
    gpus_per_learner = res.gpus_per_learner
    if gpus_per_learner and gpus_available is not None and gpus_available < gpus_per_learner:
        if not res.cpu_fallback:
            raise RuntimeError(
                f"resources.gpus_per_learner={gpus_per_learner} but the cluster has {gpus_available} GPUs"
            )
        log.warning("no GPU in the cluster: learners train on CPU (resources.cpu_fallback)")
        gpus_per_learner = 0
    ppo = (
        PPOConfig()
        .environment(RegisteredEnv, env_config=experiment_env_config(cfg))
        .framework("torch")
        .env_runners(
            num_env_runners=res.env_runners,
            num_envs_per_env_runner=res.envs_per_env_runner,
            num_cpus_per_env_runner=res.cpus_per_env_runner,
            # RLlib 2.60 re-numpy-izes every finished episode of a sample() call after each env
            # step (MultiAgentEnvRunner._sample), quadratic in episodes per call: most of the
            # sampling time for LEMON's 2-step episodes. The learner pipeline batches list
            # episodes as well.
            episodes_to_numpy=False,
        )
        .learners(
            num_learners=res.num_learners,
            num_gpus_per_learner=gpus_per_learner,
            learner_class=FastStepPPOLearner,
        )
        .training(
            lr=tr.lr,
            gamma=tr.gamma,
            lambda_=tr.lambda_,
            clip_param=tr.clip_param,
            use_kl_loss=False,
            vf_clip_param=tr.vf_clip_param,
            vf_loss_coeff=tr.vf_loss_coeff,
            entropy_coeff=tr.entropy_coeff,
            grad_clip=tr.grad_clip,
            num_epochs=tr.num_epochs,
            minibatch_size=tr.minibatch_size,
            train_batch_size_per_learner=max(1, tr.train_batch_size // max(1, res.num_learners)),
        )
        .fault_tolerance(
            restart_failed_env_runners=res.restart_failed_env_runners,
            max_num_env_runner_restarts=1000,
        )
        .callbacks(callbacks_class=[EnvReportCallbacks])
        .debugging(seed=cfg.seed, log_level="ERROR")
    )
    if get_env(cfg.env.name).vector_factory is not None:
        # One vector env of tensor copies per runner, sampled in bulk (orchestrl.envs.batched.runner).
        ppo = ppo.env_runners(env_runner_cls=BatchedEnvRunner)
    if cfg.evaluation.episodes > 0:
        ppo = ppo.evaluation(
            # RLlib builds its evaluation env runners (with the held-out env_config) only when an
            # interval is set; without them algo.evaluate() silently samples the TRAINING env. An
            # end-only evaluation therefore gets an interval that never fires during training.
            evaluation_interval=cfg.evaluation.interval or NEVER,
            evaluation_duration=cfg.evaluation.episodes,
            evaluation_duration_unit="episodes",
            evaluation_num_env_runners=0,
            evaluation_config={"env_config": experiment_env_config(cfg, evaluation=True), "explore": False},
        )
    return ppo


def experiment_env_config(cfg: ExperimentConfig, *, evaluation: bool = False) -> dict[str, Any]:
    """The ``env_config`` of the experiment's env (with the held-out overrides for evaluation)."""
    entry = get_env(cfg.env.name)
    kwargs = dict(cfg.env.kwargs)
    if evaluation:
        kwargs.update(cfg.evaluation.env_overrides)
    if entry.cache_kwarg and kwargs.get(entry.cache_kwarg) is None:
        kwargs[entry.cache_kwarg] = str(cfg.cache_dir(entry.name))
    return env_config(cfg.env.name, kwargs, cfg.env.agent_id_in_obs)
