"""Counterfactual credit (LEMON replay, COMA, COMA-CV) against IPPO and MAPPO at equal cost:
held-out success against scored executions (and env steps) on the LEMON orchestration env, and
what LEMON's replay costs.

What it runs: ippo, mappo, coma (Foerster et al.'s Eq. 4, the critic's own Q), coma_cv (the
baseline scaled by a control-variate coefficient fitted on the previous batch, with the sampled
TD(lambda) return as Q and per-agent centring), lemon (``advantage: replay``) and lemon_gae (the
same lemon runs without replay, ``advantage: gae``: the reference for the replay's cost), with 5
seeds each and equal env-step budgets (``--algos lemon_uncentred`` adds lemon with
``center_delta: false``, LEMON's uncentred delta; ``--algos lemon_two_replays`` lemon replaying
two agents' edits per episode, ``replay_agents: 2``), in-process (InProcessTrainer, no Ray, one torch
thread), two runs at a time (``--jobs``), on

- ``orchestration_k3_l4`` / ``orchestration_k3_l5`` (the full run): the LEMON env at levels 4 (8
  agents, branching DAGs over three tables) and 5 (10 agents, a table filtered twice) in
  ``benchmarks/team_vs_search.py``'s setting (its ``FULL`` settings, read from there): 3 rounds per
  episode, each rewarded by how much it improved the team's answer (``round_reward: answer``), one
  shared team reward, trained on the train split's first 1,000 tasks; the actor scores each
  candidate duty given the role (``model.option_rows``). Every algorithm of a seed starts from one
  clone (``warm_start.reuse``, kept under ``--out``): the solver cloned on 300 training tasks for 8
  epochs, then 2 rounds of DAgger; then PPO with the same settings (240 env steps per iteration, lr
  1e-4, no entropy bonus), 12 iterations: 2,880 env steps per run. The greedy policy is evaluated
  right after the warm start and every 960 env steps on the same 30 held-out tasks; metric:
  held-out success of the team's answer after round 3 (``answer_success``, what
  ``team_vs_search.py`` reports as ``team_success_at_k`` at k = 3; the held-out team return,
  summed over agents, is in ``details``). ``--quick`` runs this setting at level 2 with
  ``team_vs_search``'s ``QUICK`` warm start, 120 env steps;
- ``orchestration_l2`` / ``orchestration_l3`` / ``orchestration_l4`` (only with ``--envs``: the
  saved logs' setting): 2 rounds per episode, each rewarded by the score of the spec it ran;
  held-out success of the final spec; every algorithm starts from the env's expert cloned on 100
  training tasks for 6 epochs (LEMON's supervised start on valid specs, kept short so that no run
  starts at the threshold), then PPO at lr 5e-4 on 250 env steps per iteration: 4,000, 16,000
  and 3,000 env steps at levels 2, 3 and 4 (the saved level-4 runs of ``credit_v2_l4.log`` had
  16,000: ``--summarise`` takes each run's budget from its own line). At level 4 that start left
  the greedy teams no solved task to assign credit for, before or after RL (the pilot
  ``benchmarks/logs/credit_v3_l4_pilot.log``, in ``benchmarks/RESULTS.md``), hence the full run's
  setting;
- ``simple_spread`` (only with ``--envs simple_spread``): MPE, N=3, 25-step episodes,
  ``local_ratio=0``, from scratch, 30,000 env steps; metric: team return of the sampled policy
  summed over the 3 agents (no threshold: ``steps_to_0_8`` is null; no lemon: the env cannot
  replay; no scored executions).

The cost that counts on the LEMON env is the scored sandbox execution: every env step executes the
team's spec and scores it (an episode of R rounds is R executions), and each of LEMON's
counterfactual replays is one more (the env runner's ``env/cf_executions``). Each run records, at
every evaluation, the scored executions so far (env steps sampled plus replays; the warm start's
and the evaluations' are the same for every algorithm and not counted) beside the env steps, and
the report puts every algorithm on that x-axis: lemon spends more executions per env step.

The full run: five seeds; at level 4 the six algorithms, at level 5 ippo, mappo, lemon and
lemon_gae; two runs at a time. What it costs, from the parts the level-4 and level-5 pilots measured
(task stores, a seed's clone, each run after it), is in ``benchmarks/RESULTS.md`` (the level-5
pilot's section): more than the 3 hours the benchmarks are sized to, most of it the clones. The
budget is kept at team_vs_search's, so the two benchmarks measure the same teams, and the log is
resumable, so the run splits over invocations (``--log``, ``--first-seed``).

Printed: ONE JSON object with exactly the keys ``final_iqm``, ``ci95``, ``steps_to_0_8``,
``executions_to_0_8``, ``p_improvement_vs_ippo``, ``p_improvement_vs_lemon_gae`` and
``replay_cost``, each mapping env -> algorithm -> value (for ``replay_cost``: env -> figures):

- ``final_iqm`` / ``ci95``: IQM over seeds of the last evaluation, 95% stratified-bootstrap CI
  (``orchestrl.tracking.stats``);
- ``steps_to_0_8``: env steps at which the IQM curve first reaches 0.8 (null if never; the
  per-seed steps and their CI are in ``details``);
- ``executions_to_0_8``: scored executions at which the IQM curve against executions first reaches
  0.8 (each run's value at x executions is that of its last evaluation within x; null if never,
  and for runs logged before runs recorded their executions: the saved
  ``benchmarks/logs/credit_v2_*.log``);
- ``p_improvement_vs_ippo`` / ``p_improvement_vs_lemon_gae``: [P(X > baseline), 95% CI] from the
  runs' finals (0.5 is a match);
- ``replay_cost``: ``wall_time_overhead_pct``: lemon's training wall time (sampling + updates, not
  the warm start or the evaluations, summed over seeds) over lemon_gae's with the same seeds,
  minus 1, in % (what LEMON's reported +12% compares to; ``paired_seeds``: the seeds both ran,
  with the same optimizer step); ``cpu_time_overhead_pct`` the same for CPU time, the sandbox's
  processes included (they run the env's and the replays' executions; null for runs logged before
  they were measured), ``cpu_time_overhead_pct_without_sandbox`` for the training processes'
  alone; ``extra_executions_per_episode``; ``invalid_final_per_episode`` (episodes whose final
  spec was invalid get no replay); ``nodes_rerun_per_execution``; ``replay_share_pct`` (the
  replays' own wall time over the rest of lemon's training time).

``credit.json`` under ``--out`` holds the same keys plus ``critic_explained_variance`` (env ->
algorithm -> IQM over seeds of each run's mean, over its updates, of RLlib's
``vf_explained_var``: for coma and coma_cv that critic is Q(s, u) of the taken action), ``details``
(per env: per-seed finals, steps and executions to 0.8, IQM curves with their bands against env
steps and against scored executions, returns, wall time and executions per run, and
``replay_cost_by_algorithm``: ``replay_cost``'s figures for lemon and each variant that replays,
against the same lemon_gae runs) and ``meta``
(command, wall time, load, the task store's warm-up); ``credit.png`` plots the curves against
both.

Each run trains in a fresh process. Before the first, the training pool of each orchestration
level (1,000 tasks) is generated into the task store, ``cache/tasks`` under ``--out`` (export
``ORCHESTRL_TASK_STORE=DIR`` to share one store between invocations), so that every run reads the
same tasks from disk and none pays for generating them: minutes per level the first time (what a
task costs to generate: ``benchmarks/task_store.py``), nothing once stored. Runs measured before
the store existed (the logs' level-3 runs, level 2's ippo seeds 0-2 and mappo's first) generated
their tasks themselves: their success figures compare, their times do not.

Run:
    .venv/bin/python benchmarks/credit.py --quick     # 2 seeds, level 2, 120 env steps
    .venv/bin/python benchmarks/credit.py             # the full benchmark (levels 4 and 5)
    .venv/bin/python benchmarks/credit.py --envs orchestration_l3 --algos ippo coma coma_cv \
        --seeds 10 --out runs/bench/credit_l3_coma    # the COMAs against ippo at level 3, 10 seeds
    .venv/bin/python benchmarks/credit.py --envs orchestration_l4 --algos lemon --seeds 3 --first-seed 2 \
        2> l4_lemon_2_4.err                           # seeds 2-4 only; each run's line is on stderr
    .venv/bin/python benchmarks/credit.py --summarise l3.err l4_lemon_0_1.err l4_lemon_2_4.err
                                                      # one report from the runs of several invocations
                                                      # (or of one cut short), no training
    .venv/bin/python benchmarks/credit.py --envs orchestration_l4 --log l4.log
                                                      # resumable: trains only the runs l4.log lacks,
                                                      # appends each finished run's line to it, and
                                                      # reports over all of them; stop it at any time

Expected: the JSON above. The saved runs (``benchmarks/logs/credit_v2_l*.log``: levels 2, 3 and 4,
logged before runs recorded their executions and the sandbox's CPU, and before the observation
lost the solver's conclusions; ``benchmarks/logs/credit_v3_l4_pilot.log``: ippo, lemon and
lemon_gae at level 4 on today's env, two seeds) and the figures ``--summarise`` gives for them,
with the commands that produced them, are in ``benchmarks/RESULTS.md`` (section "Counterfactual
credit on the LEMON env"; ``make results`` rebuilds it). ``--quick`` checks the pipeline and
compares nothing: two seeds at 120 env steps leave every CI wide.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_log
import team_vs_search

ALGORITHMS = ("ippo", "mappo", "coma", "coma_cv", "lemon", "lemon_gae")
REPLAY_FREE = "lemon_gae"
"""lemon without replay (``advantage: gae``): the same runs, seeds and settings minus the replays."""
LEMON_VARIANTS = {
    REPLAY_FREE: {"advantage": "gae"},
    "lemon_uncentred": {"center_delta": False},
    "lemon_two_replays": {"replay_agents": 2},
}
"""Benchmark names for lemon with other knobs; lemon_uncentred (LEMON's delta without centring) and
lemon_two_replays (two agents' edits replayed per episode, chosen by how much their deltas vary:
``replay_agents``) run only when ``--algos`` names them."""
REPLAYING = ("lemon", *LEMON_VARIANTS)
REPORT_KEYS = (
    "final_iqm",
    "ci95",
    "steps_to_0_8",
    "executions_to_0_8",
    "p_improvement_vs_ippo",
    "p_improvement_vs_lemon_gae",
    "replay_cost",
    "environments",
)
THRESHOLD = 0.8
FULL_LEVELS = (4, 5)
"""The orchestration levels the full run measures, in team_vs_search's setting (``orchestration_k3_l4``,
``orchestration_k3_l5``); the saved logs' setting stays available by ``--envs`` (``orchestration_l2``
to ``orchestration_l4``)."""
FULL_LEVEL_5_ALGORITHMS = ("ippo", "mappo", "lemon", "lemon_gae")
"""Level 5 of the full run compares lemon with the independent learners, MAPPO's central critic and
itself without replay; the COMAs run at level 4 (and at level 5 by ``--algos``), where a run costs
less."""
TASK_POOL = 1000
"""Orchestration runs train on the train split's first 1,000 tasks (generated tables and node
outputs stay cached: several times faster sampling); evaluation stays on held-out tasks."""


# Both COMAs: one critic-only update first. coma keeps Eq. 4 (the critic's own Q, the whole
# baseline); coma_cv's defaults are what v1's probes adopted for "coma" (the sampled TD(lambda)
# return as Q, per-agent centring, the scaled baseline), now with the coefficient fitted on the
# previous batch. v1's probes at level 3 (before the fixes): with the critic's own Q, seed 0
# fell from 0.70 to 0.00 within 8,000 env steps; the sampled return, centred per agent,
# ended at 0.43 / 0.60 / 0.37 / 0.17 / 0.47 on seeds 0-4 after 12,000 (ippo 0.47 / 0.47 / 0.30
# / 0.30 / 0.33); with the in-batch scaled baseline 0.80 / 0.70 / 0.73 / 0.43 / 0.63 at 16,000.
ORCHESTRATION_KNOBS = {"coma": {"critic_warmup": 1}, "coma_cv": {"critic_warmup": 1}}


@dataclass(frozen=True)
class Bench:
    """One env of the benchmark and its fixed training settings (the same for every algorithm)."""

    env: str
    kwargs: dict[str, Any]
    eval_overrides: dict[str, Any]
    metric: str
    """``success`` (held-out success, read from the env's info metric ``success_key``; the team
    return is reported too) or ``return``."""
    iterations: int
    batch: int
    """Env steps per iteration; the budget is ``iterations * batch`` env steps for every algorithm."""
    eval_every: int
    eval_episodes: int
    eval_explore: bool
    """Evaluate the sampled (True) or the greedy (False) policy."""
    envs_per_runner: int
    training: dict[str, Any] = field(default_factory=dict)
    algo_knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    hidden: tuple[int, ...] = (64, 64)
    warm_start: dict[str, Any] = field(default_factory=dict)
    """The experiment's ``warm_start:`` section (behaviour cloning of the expert before RL)."""
    scored_executions: bool = False
    """Each env step is one scored sandbox execution (the orchestration env): runs record the
    executions so far (env steps plus LEMON's replays) at every evaluation, the equal-cost x-axis."""
    default: bool = True
    """Run without ``--envs`` naming it."""
    success_key: str = "success"
    """The info metric that is held-out success: ``success`` (the final spec's) or ``answer_success``
    (the team's answer after its last round, chosen as ``solver_k`` chooses)."""
    option_rows: bool = False
    """``model.option_rows``: each candidate duty scored given the role."""
    algorithms: tuple[str, ...] = ALGORITHMS
    """What runs on this env when ``--algos`` names none."""

    @property
    def budget(self) -> int:
        return self.iterations * self.batch


def benches(quick: bool) -> dict[str, Bench]:
    return {**search_setting_benches(quick), **saved_log_benches(quick), "simple_spread": spread_bench(quick)}


def search_setting_benches(quick: bool) -> dict[str, Bench]:
    """The full run's envs: team_vs_search's setting (its ``FULL`` settings; ``QUICK`` with
    ``--quick``), so that credit is measured from a team that solves tasks.

    3 rounds per episode, each rewarded by how much it improved the team's answer (``round_reward:
    answer``), held-out success is the answer after round 3 (what ``team_success_at_k`` at k = 3
    scores); the actor scores each candidate duty given the role (``option_rows``); the warm start
    clones the solver on 300 training tasks for 8 epochs, then 2 rounds of DAgger, and every
    algorithm of a seed loads that one clone (``warm_start.reuse``); PPO at lr 1e-4 on 240 env steps
    per iteration, 12 iterations. The saved logs' setting (2 rounds, the final spec's success, a
    6-epoch warm start on 100 tasks) left the greedy teams no solved task at level 4, before or
    after RL (``benchmarks/logs/credit_v3_l4_pilot.log``): nothing to assign credit for."""
    settings = team_vs_search.QUICK if quick else team_vs_search.FULL
    levels = (2,) if quick else FULL_LEVELS
    return {
        f"orchestration_k3_l{level}": Bench(
            env="orchestration",
            kwargs={
                "level": level,
                "task_pool": TASK_POOL,
                "rounds": team_vs_search.ROUNDS,
                "round_reward": settings.round_reward,
            },
            eval_overrides={"split": "heldout"},
            metric="success",
            success_key="answer_success",
            iterations=4 if quick else settings.iterations,
            batch=settings.batch,
            eval_every=2 if quick else 4,
            eval_episodes=10 if quick else 30,
            eval_explore=False,
            envs_per_runner=4,
            training=team_vs_search.ppo_training(settings),
            algo_knobs=ORCHESTRATION_KNOBS,
            hidden=(256, 256),
            option_rows=settings.option_rows,
            warm_start={
                "episodes": settings.warm_episodes,
                "epochs": settings.warm_epochs,
                "dagger_rounds": settings.dagger_rounds,
                "reuse": True,
            },
            scored_executions=True,
            algorithms=ALGORITHMS if level == 4 else FULL_LEVEL_5_ALGORITHMS,
        )
        for level in levels
    }


def saved_log_benches(quick: bool) -> dict[str, Bench]:
    """The setting of the saved logs (``benchmarks/logs/credit_v2_l*.log``,
    ``credit_v3_l4_pilot.log``): 2 rounds, the final spec's success, a short warm start. Only by
    ``--envs`` (and ``--summarise``)."""
    # Every algorithm starts from the same warm start (the expert cloned on 100 training tasks for 6
    # epochs: LEMON's "supervised on valid specs"), then PPO without an entropy bonus (it would
    # only undo the cloning). Short on purpose: measured on v1 at level 3, seeds 0-2, held-out
    # success after cloning alone was 0.17 / 0.07 / 0.03 (4 epochs), 0.37 / 0.30 / 0.20 (5) and
    # 0.87 / 0.77 / 0.80 (8): at 8 the threshold is reached before any RL. On v2 the greedy team
    # right after the 6-epoch warm start scores 0.00 held-out success on every seed at level 3
    # (team return about -1): every algorithm starts from a team whose greedy specs solve no task.
    orch_training = {"lr": 5e-4, "num_epochs": 8, "minibatch_size": 250, "entropy_coeff": 0.0}
    # (--quick runs the full run's setting.) Level 4: 3,000 env steps, the budget of the pilot
    # credit_v3_l4_pilot.log; levels 2 and 3 keep the saved logs' budgets (the saved level-4 runs
    # had 64 iterations: --summarise reads a run's budget from its line).
    levels = {} if quick else {2: 16, 3: 64, 4: 12}
    return {
        f"orchestration_l{level}": Bench(
            env="orchestration",
            kwargs={"level": level, "task_pool": TASK_POOL},
            eval_overrides={"split": "heldout"},
            metric="success",
            iterations=iterations,
            batch=250,
            eval_every=4,
            eval_episodes=30,
            eval_explore=False,
            envs_per_runner=4,
            training=orch_training,
            algo_knobs=ORCHESTRATION_KNOBS,
            hidden=(256, 256),
            warm_start={"episodes": 100, "epochs": 6},
            scored_executions=True,
            default=False,
        )
        for level, iterations in levels.items()
    }


def spread_bench(quick: bool) -> Bench:
    """MPE simple_spread (only by ``--envs simple_spread``)."""
    spread_training = {"lr": 7e-4, "num_epochs": 5, "minibatch_size": 1000, "entropy_coeff": 0.01}
    return Bench(
        env="simple_spread",
        kwargs={"N": 3, "max_cycles": 25, "local_ratio": 0.0},
        eval_overrides={},
        metric="return",
        iterations=3 if quick else 15,
        batch=2000,
        eval_every=1 if quick else 3,
        eval_episodes=10,
        eval_explore=True,
        envs_per_runner=8,
        training=spread_training,
        algo_knobs={"coma": {"critic_warmup": 2}, "coma_cv": {"critic_warmup": 2}},
        default=False,
    )


def algorithm_section(bench: Bench, algo: str) -> dict[str, Any]:
    """The experiment's ``algorithm:`` section (lemon_gae is lemon with ``advantage: gae``)."""
    if algo in LEMON_VARIANTS:
        return {"name": "lemon", **LEMON_VARIANTS[algo], **bench.algo_knobs.get("lemon", {})}
    return {"name": algo, **bench.algo_knobs.get(algo, {})}


def experiment(bench: Bench, algo: str, seed: int, run_dir: Path | None = None) -> dict[str, Any]:
    """The experiment one run trains; ``run_dir`` (the default: ``runs``) keeps the clone a
    ``warm_start.reuse`` bench's algorithms share."""
    return {
        "name": f"credit_{bench.env}_{algo}",
        "seed": seed,
        **({"run_dir": str(run_dir)} if run_dir is not None else {}),
        "env": {"name": bench.env, "kwargs": dict(bench.kwargs)},
        "algorithm": algorithm_section(bench, algo),
        "model": {"hidden": list(bench.hidden), **({"option_rows": True} if bench.option_rows else {})},
        "warm_start": dict(bench.warm_start),
        "resources": {"env_runners": 0, "envs_per_env_runner": bench.envs_per_runner},
        "training": {"train_batch_size": bench.batch, **bench.training},
        "evaluation": {"episodes": bench.eval_episodes, "env_overrides": dict(bench.eval_overrides)},
    }


def sample(runner: Any, steps: int, chunk: int = 64) -> list:
    """``steps`` env steps in chunks: RLlib 2.60 numpy-fies every finished episode of a ``sample()``
    call once per env step, quadratic in episodes per call, so short calls sample many episodes
    much faster than one long call."""
    episodes, done = [], 0
    while done < steps:
        got = runner.sample(num_timesteps=min(chunk, steps - done), explore=True)
        episodes += got
        done += sum(len(ep) for ep in got)
    return episodes


def evaluate(bench: Bench, runner: Any, learner: Any) -> dict[str, float]:
    """Play on the held-out split (the same tasks at every evaluation: each call resets the eval
    env runner with its seed). Team return = summed over agents."""
    runner.set_state({"rl_module": learner.module.get_state(inference_only=True)})
    episodes = runner.sample(num_episodes=bench.eval_episodes, explore=bench.eval_explore)
    out = {"return": float(np.mean([ep.get_return() for ep in episodes]))}
    if bench.metric == "success":
        success = []
        for ep in episodes:
            infos = ep.get_infos(-1).values()
            metrics = next((i["metrics"] for i in infos if isinstance(i, dict) and "metrics" in i), {})
            success.append(float(metrics.get(bench.success_key, 0.0)))
        out["success"] = float(np.mean(success))
    return out


COST_KEYS = {
    "executions": "executions",
    "seconds": "time_s",
    "nodes_run": "nodes_run",
    "episodes": "episodes",
    "invalid_final": "invalid_final",
}
"""Run totals kept from the env runner's ``env/cf_<name>`` metrics (LEMON's replays)."""


def train_run(bench: Bench, algo: str, seed: int, run_dir: Path | None = None) -> dict[str, Any]:
    from ray.rllib.algorithms.ppo.ppo import LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY as VF_EXPLAINED_VAR
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    from orchestrl.algorithms.ppo_learner import FastStepPPOLearner
    from orchestrl.envs.orchestration.sandbox.pool import shared_pool_cpu_seconds
    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.inprocess import InProcessTrainer

    started = time.perf_counter()
    ppo = build_ppo_config(validate_config(experiment(bench, algo, seed, run_dir)))
    trainer = InProcessTrainer(ppo)
    warm_start_s = time.perf_counter() - started  # cloning, or loading a clone another run stored
    evaluator = MultiAgentEnvRunner(config=ppo.get_evaluation_config_object())
    points: list[int] = []
    executions: list[int] = []  # scored executions at each point: env steps sampled plus replays
    curves: dict[str, list[float]] = {}
    steps, cost = 0, dict.fromkeys(COST_KEYS, 0.0)
    # sampling + updates only: what the replays add to; the sandbox's processes are not this
    # process's children, so their CPU is read apart
    train_s = train_cpu_s = train_sandbox_cpu_s = 0.0
    critic_ev: list[float] = []  # per update: how much of the value targets' variance the critic explains
    try:
        if trainer.warm_start:  # where RL starts from: the cloned policy, before any env step
            points.append(0)
            executions.append(0)
            for key, value in evaluate(bench, evaluator, trainer.learner).items():
                curves.setdefault(key, []).append(value)
        for iteration in range(1, bench.iterations + 1):
            wall, cpu, sandbox = time.perf_counter(), time.process_time(), shared_pool_cpu_seconds()
            episodes = sample(trainer.runner, bench.batch)
            steps += sum(len(ep) for ep in episodes)
            learned = trainer.update(episodes)
            train_s += time.perf_counter() - wall
            train_cpu_s += time.process_time() - cpu
            train_sandbox_cpu_s += max(shared_pool_cpu_seconds() - sandbox, 0.0)  # < 0: a new pool
            explained = [m[VF_EXPLAINED_VAR] for m in learned.values() if VF_EXPLAINED_VAR in m]
            critic_ev.append(float(np.mean(explained)))
            metrics = trainer.runner.get_metrics()
            for key, name in COST_KEYS.items():
                stat = metrics.get(f"env/cf_{name}")
                cost[key] += float(stat.peek()) if hasattr(stat, "peek") else 0.0
            if iteration % bench.eval_every == 0 or iteration == bench.iterations:
                points.append(iteration * bench.batch)
                executions.append(steps + round(cost["executions"]))
                for key, value in evaluate(bench, evaluator, trainer.learner).items():
                    curves.setdefault(key, []).append(value)
    finally:
        trainer.stop()
        evaluator.stop()
    return {
        "steps": points,
        **({"executions": executions} if bench.scored_executions else {}),
        "curves": curves,
        "env_steps_sampled": steps,
        "wall_s": time.perf_counter() - started,
        "warm_start_s": warm_start_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "train_sandbox_cpu_s": train_sandbox_cpu_s,
        "cost": cost,
        "critic_ev": critic_ev,
        "fast_step": isinstance(trainer.learner, FastStepPPOLearner),
    }


def store_tasks(level: int, seeds: list[int]) -> int:
    """Generates the training tasks ``seeds`` of ``level`` into the task store (in a pool's
    process, which inherits the store's directory); returns how many were not stored yet."""
    from orchestrl.envs.orchestration.task_store import active_store
    from orchestrl.envs.orchestration.tasks import generate_task

    store = active_store()
    if store is None:
        return 0
    missing = [s for s in seeds if not store.path(level, "train", s).is_file()]
    for seed in missing:
        generate_task(level, "train", seed)
    return len(missing)


def warm_task_store(chosen: dict[str, Bench], pool: Any, jobs: int) -> dict[str, Any]:
    """Stores every orchestration bench's training pool before the first run starts, so that every
    run reads the same tasks from disk and none pays for generating them, whichever runs first
    (a level-3 run that generates its 1,000 tasks spends a large share of its time on it)."""
    from orchestrl.envs.orchestration.task_store import active_store

    store = active_store()
    if store is None:  # turned off by the caller: nothing to fill
        return {}
    started, futures = time.perf_counter(), []
    for bench in chosen.values():
        if bench.env == "orchestration" and bench.kwargs.get("task_pool"):
            seeds = list(range(int(bench.kwargs["task_pool"])))
            futures += [pool.submit(store_tasks, bench.kwargs["level"], seeds[i::jobs]) for i in range(jobs)]
    generated = sum(f.result() for f in futures)
    return {"dir": str(store.root), "generated": generated, "seconds": time.perf_counter() - started}


def first_reach(steps: list[int], values: list[float]) -> int | None:
    """The first step whose value reaches :data:`THRESHOLD` (up to float rounding)."""
    from orchestrl.tracking.stats import reaches

    return next((s for s, v in zip(steps, values, strict=True) if reaches(v, THRESHOLD)), None)


def within(xs: list[int], values: list[float], grid: list[int]) -> dict[int, float]:
    """At each ``grid`` point x from ``xs[0]`` on, the value at the last of ``xs`` (increasing) that
    is at most x; past the last, the last value (a run that spent less keeps what it reached)."""
    return {x: values[bisect.bisect_right(xs, x) - 1] for x in grid if x >= xs[0]}


def curve_summary(runs: list[dict[str, Any]], key: str, axis: str = "steps") -> dict[str, list[float]]:
    """The IQM curve over ``runs`` of their ``key`` evaluations, with its 95% band, against ``axis``:
    ``steps`` (every run is evaluated at the same env steps) or ``executions`` (scored executions:
    each run at x counts with its last evaluation within x executions, on the union of the runs'
    evaluation points, since runs with more replays per env step get to each point later)."""
    from orchestrl.tracking.stats import curve_band

    if axis == "steps":
        values = [dict(zip(r["steps"], r["curves"][key], strict=True)) for r in runs]
    else:
        grid = sorted({x for r in runs for x in r[axis]})
        values = [within(r[axis], r["curves"][key], grid) for r in runs]
    band = curve_band(values, seed=0)
    return {
        axis: [p.step for p in band],
        "iqm": [p.iqm.value for p in band],
        "low": [p.iqm.low for p in band],
        "high": [p.iqm.high for p in band],
    }


def put_iqm(out: dict[str, Any], key: str, ci_key: str, algo: str, per_seed: list[float]) -> None:
    """``out[key][algo]``: the IQM over seeds of one value per seed; ``out[ci_key][algo]``: its 95%
    stratified-bootstrap CI."""
    from orchestrl.tracking.stats import aggregate

    agg = aggregate(per_seed, seed=0)
    out[key][algo] = agg.iqm.value
    out[ci_key][algo] = [agg.iqm.low, agg.iqm.high]


def put_executions(
    out: dict[str, Any], algo: str, runs: list[dict[str, Any]], metric: str, success: bool
) -> None:
    """``algo``'s figures against scored executions: the mean executions per run, the IQM curve of
    ``metric`` (``curves_executions``) and, for held-out ``success``, the executions at which that
    curve first reaches 0.8 and each seed's executions at its first evaluation at 0.8. Null unless
    every run recorded its executions (runs logged before the record existed; envs that score none)."""
    recorded = bool(runs) and all("executions" in r for r in runs)
    out["executions_per_run"][algo] = (
        float(np.mean([r["executions"][-1] for r in runs])) if recorded else None
    )
    out["executions_to_0_8"][algo] = out["executions_to_0_8_per_seed"][algo] = None
    if not recorded:
        return
    curve = out["curves_executions"][algo] = curve_summary(runs, metric, "executions")
    if success:
        out["executions_to_0_8"][algo] = first_reach(curve["executions"], curve["iqm"])
        out["executions_to_0_8_per_seed"][algo] = [
            first_reach(r["executions"], r["curves"][metric]) for r in runs
        ]


def summarise(bench: Bench, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Everything measured on one env, per algorithm."""
    success = bench.metric == "success"
    out: dict[str, Any] = {
        "metric": "held-out success"
        if success
        else "team return of the sampled policy (sum over 3 agents, 25-step episodes)",
        "budget_env_steps": max(r["steps"][-1] for algo_runs in runs.values() for r in algo_runs),
        "seeds": max(len(r) for r in runs.values()),
        "seeds_per_algorithm": {algo: len(r) for algo, r in runs.items()},
        "steps_to_0_8": {},
        "steps_to_0_8_per_seed": {},
        "steps_to_0_8_seed_iqm": {},
        "steps_to_0_8_ci95": {},
        "steps_to_0_8_never": {},
        "executions_to_0_8": {},
        "executions_to_0_8_per_seed": {},
        "executions_per_run": {},
        "curves_executions": {},
        "final_iqm": {},
        "ci95": {},
        "final_per_seed": {},
        "curves": {},
        "wall_s_per_run": {},
        "critic_explained_variance": {},
        "critic_explained_variance_ci95": {},
    }
    if success:
        out.update({"final_iqm_return": {}, "ci95_return": {}, "curves_return": {}})
    for algo, algo_runs in runs.items():
        finals = [r["curves"][bench.metric][-1] for r in algo_runs]
        put_iqm(out, "final_iqm", "ci95", algo, finals)
        out["final_per_seed"][algo] = finals
        out["curves"][algo] = curve_summary(algo_runs, bench.metric)
        out["wall_s_per_run"][algo] = float(np.mean([r["wall_s"] for r in algo_runs]))
        explained = [np.mean(r["critic_ev"]) for r in algo_runs]
        put_iqm(out, "critic_explained_variance", "critic_explained_variance_ci95", algo, explained)
        put_executions(out, algo, algo_runs, bench.metric, success)
        if success:
            curve = out["curves"][algo]
            out["steps_to_0_8"][algo] = first_reach(curve["steps"], curve["iqm"])
            reach = [first_reach(r["steps"], r["curves"]["success"]) for r in algo_runs]
            out["steps_to_0_8_per_seed"][algo] = reach
            # never reached: counted at the run's budget, so this interval is a lower bound for it
            steps = [r["steps"][-1] if s is None else s for r, s in zip(algo_runs, reach, strict=True)]
            put_iqm(out, "steps_to_0_8_seed_iqm", "steps_to_0_8_ci95", algo, steps)
            out["steps_to_0_8_never"][algo] = sum(s is None for s in reach)
            returns = [r["curves"]["return"][-1] for r in algo_runs]
            put_iqm(out, "final_iqm_return", "ci95_return", algo, returns)
            out["curves_return"][algo] = curve_summary(algo_runs, "return")
        else:
            out["steps_to_0_8"][algo] = None
    finals = out["final_per_seed"]
    for baseline in ("ippo", REPLAY_FREE):  # P(X > baseline): p_improvement_vs_ippo, ..._vs_lemon_gae
        out[f"p_improvement_vs_{baseline}"] = improvement_over(finals, baseline) if baseline in runs else {}
    out["replay_cost"] = replay_cost(runs.get("lemon", []), runs.get(REPLAY_FREE, []))
    out["environments"] = run_log.environments(r for algo_runs in runs.values() for r in algo_runs)
    out["replay_cost_by_algorithm"] = {  # lemon's, and that of each variant that replays
        algo: replay_cost(algo_runs, runs.get(REPLAY_FREE, []))
        for algo, algo_runs in runs.items()
        if algo in REPLAYING and algo != REPLAY_FREE
    }
    return out


def replay_cost(lemon: list[dict[str, Any]], replay_free: list[dict[str, Any]]) -> dict[str, Any]:
    """What LEMON's replays cost: extra executions per episode (all lemon runs), and lemon's training
    time over that of the same runs without replay (``lemon_gae``), in %, summed over the seeds
    that both ran with the same optimizer step (``fast_step``; runs logged before it existed took
    RLlib's): ``paired_seeds``. CPU time counts the sandbox's processes (``cpu_time_overhead_pct``,
    None unless every paired run measured them) and, apart, the training processes' alone
    (``cpu_time_overhead_pct_without_sandbox``). Empty without lemon runs; overheads None without a
    pair."""
    if not lemon:
        return {}
    cost = {k: float(np.sum([r["cost"][k] for r in lemon])) for k in COST_KEYS}
    train = float(np.sum([r["train_s"] for r in lemon]))
    out: dict[str, Any] = {
        "wall_time_overhead_pct": None,
        "cpu_time_overhead_pct": None,
        "cpu_time_overhead_pct_without_sandbox": None,
        "extra_executions_per_episode": cost["executions"] / max(cost["episodes"], 1.0),
        "invalid_final_per_episode": cost["invalid_final"] / max(cost["episodes"], 1.0),
        "nodes_rerun_per_execution": cost["nodes_run"] / max(cost["executions"], 1.0),
        "replay_share_pct": 100.0 * cost["seconds"] / max(train - cost["seconds"], 1e-9),
        "lemon_train_s": None,
        "replay_free_train_s": None,
        "lemon_train_cpu_s": None,
        "replay_free_train_cpu_s": None,
        "paired_seeds": [],
        "lemon_paper_overhead_pct": 12.0,
    }
    free = {r["seed"]: r for r in replay_free}
    pairs = [
        (r, free[r["seed"]])
        for r in lemon
        if r["seed"] in free and r.get("fast_step", False) == free[r["seed"]].get("fast_step", False)
    ]
    if pairs:
        # (with replay, without) summed over the paired seeds, once per time kind
        wall, cpu = (
            [float(np.sum([pair[i][key] for pair in pairs])) for i in (0, 1)]
            for key in ("train_s", "train_cpu_s")
        )
        out["lemon_train_s"], out["replay_free_train_s"] = wall
        out["paired_seeds"] = sorted(r["seed"] for r, _ in pairs)
        out["wall_time_overhead_pct"] = 100.0 * (wall[0] / max(wall[1], 1e-9) - 1.0)
        out["cpu_time_overhead_pct_without_sandbox"] = 100.0 * (cpu[0] / max(cpu[1], 1e-9) - 1.0)
        if all("train_sandbox_cpu_s" in run for pair in pairs for run in pair):
            total = [
                float(np.sum([pair[i]["train_cpu_s"] + pair[i]["train_sandbox_cpu_s"] for pair in pairs]))
                for i in (0, 1)
            ]
            out["lemon_train_cpu_s"], out["replay_free_train_cpu_s"] = total
            out["cpu_time_overhead_pct"] = 100.0 * (total[0] / max(total[1], 1e-9) - 1.0)
    return out


def report(details: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The printed object: each of ``REPORT_KEYS`` as env -> algorithm -> value (``replay_cost``:
    env -> figures)."""
    return {key: {env: d[key] for env, d in details.items()} for key in REPORT_KEYS}


def improvement_over(finals: dict[str, list[float]], baseline: str) -> dict[str, list[float]]:
    """algorithm -> [P(X > baseline), 95% CI low, high] from each run's final score: the probability
    that a run of X ends above a run of the baseline (ties count one half; Agarwal et al. 2021). 0.5
    is a match; an interval containing 0.5 cannot tell the two apart."""
    from orchestrl.tracking.stats import probability_of_improvement

    out = {}
    for algo, scores in finals.items():
        if algo != baseline:
            p = probability_of_improvement(scores, finals[baseline], seed=0)
            out[algo] = [p.value, p.low, p.high]
    return out


X_LABELS = {"steps": "env steps", "executions": "scored executions (env steps + replays)"}
"""The x-axes of the curves (``curve_summary``'s ``axis``)."""


def plot(results: dict[str, Any], path: Path) -> None:
    """One row per env: its metric against env steps and, where runs recorded them, against scored
    executions (a step curve: each run counts with its last evaluation within x), then the held-out
    team return against env steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = []
    for env, res in results.items():
        if isinstance(res, dict) and "curves" in res:
            row = [(res["curves"], res["metric"], "steps")]
            if res.get("curves_executions"):
                row.append((res["curves_executions"], res["metric"], "executions"))
            if "curves_return" in res:
                row.append((res["curves_return"], "held-out team return (sum over agents)", "steps"))
            rows.append((env, row))
    if not rows:
        return
    width = max(len(row) for _, row in rows)
    fig, axes = plt.subplots(len(rows), width, figsize=(4.2 * width, 3.6 * len(rows)), squeeze=False)
    for ax_row, (env, row) in zip(axes, rows, strict=True):
        for ax in ax_row[len(row) :]:
            ax.set_visible(False)
        for ax, (curves, metric, axis) in zip(ax_row, row, strict=False):
            step = "post" if axis == "executions" else None
            drawstyle = "steps-post" if step else "default"
            for algo, c in curves.items():
                (line,) = ax.plot(c[axis], c["iqm"], marker="o", ms=3, label=algo, drawstyle=drawstyle)
                ax.fill_between(c[axis], c["low"], c["high"], alpha=0.2, color=line.get_color(), step=step)
            if metric == "held-out success":
                ax.axhline(THRESHOLD, ls=":", c="grey", lw=1)
                ax.set_ylim(-0.05, 1.05)
            ax.set_title(f"{env} ({results[env]['seeds']} seeds, IQM, 95% CI)", fontsize=9)
            ax.set_xlabel(X_LABELS[axis])
            ax.set_ylabel(metric.split(" (")[0], fontsize=8)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, level 2, 500 env steps")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per algorithm (default 5; quick 2)")
    parser.add_argument("--envs", nargs="*", default=None, help="subset of envs to run")
    parser.add_argument(
        "--algos",
        nargs="*",
        choices=list(dict.fromkeys([*ALGORITHMS, *LEMON_VARIANTS])),
        default=None,
        help="algorithms to run (default: each env's own set; level 5's: ippo mappo lemon lemon_gae)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/credit"))
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once (one process each)")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1"
    )
    parser.add_argument(
        "--log",
        type=Path,
        metavar="LOG",
        help=(
            "resumable: the runs LOG holds are not trained again, each new run's line is appended to "
            "it (one LOG per setting: --quick runs have the same env names as full ones)"
        ),
    )
    parser.add_argument(
        "--summarise",
        nargs="+",
        metavar="LOG",
        type=Path,
        help="no training: the figures of the runs these stderr LOGs of earlier runs hold",
    )
    args = parser.parse_args(argv)
    if args.summarise:
        return summarise_logs(args.summarise, args.quick, args.out, argv)
    known = list(benches(args.quick))
    unknown = sorted(set(args.envs or ()) - set(known))
    if unknown:
        mode = " with --quick" if args.quick else ""
        parser.error(f"--envs: unknown env{mode}: {', '.join(unknown)} (known: {', '.join(known)})")
    if args.log is not None and (args.log.is_dir() or not args.log.parent.is_dir()):
        parser.error(f"--log: {args.log} is a directory or in no directory")
    logged = read_runs([args.log]) if args.log is not None and args.log.is_file() else {}

    from orchestrl.envs.counterfactual import supports_counterfactual
    from orchestrl.envs.registry import get_env
    from orchestrl.training.runtime import quiet_environment, silence_noise, worker_pool

    args.out.mkdir(parents=True, exist_ok=True)
    quiet_environment(args.out)
    silence_noise(False)
    seeds = args.seeds or (2 if args.quick else 5)
    started, load_before = time.perf_counter(), os.getloadavg()
    skipped: dict[str, str] = {}
    jobs: list[tuple[str, str, int]] = []
    chosen = {n: b for n, b in benches(args.quick).items() if (n in args.envs if args.envs else b.default)}
    for name, bench in chosen.items():
        try:
            env_class = get_env(bench.env).load()
        except Exception as exc:
            skipped[name] = f"{type(exc).__name__}: {exc}"
            continue
        replays = supports_counterfactual(env_class)
        algos = [a for a in args.algos or bench.algorithms if replays or a not in REPLAYING]
        first = args.first_seed
        jobs += [(name, algo, seed) for algo in algos for seed in range(first, first + seeds)]
    runs = {key: logged[key] for key in jobs if key in logged}
    todo = [key for key in jobs if key not in logged]
    # one process per run: at level 2 a run that followed another in the same process took 2.5x
    # less CPU than the same algorithm's first run (ippo 81 s against 202 s; generated tasks and
    # node outputs stay cached in a process), which biases the wall-time comparisons
    # (replay_cost) against whichever algorithm runs first
    # the same reason for one task store, filled before any run starts (not with --quick: its
    # 500 env steps meet far fewer of the 1,000 tasks than the warm-up would generate)
    stored: dict[str, Any] = {}
    where = run_log.environment()  # the code and libraries the runs load, as they start
    with worker_pool(max(1, args.jobs), args.out, fresh_per_task=True) as pool:
        if todo and not args.quick:
            to_train = {n: chosen[n] for n, _, _ in todo}
            stored = warm_task_store(to_train, pool, max(1, args.jobs))
        run_dir = (args.out / "runs").resolve()  # a seed's algorithms share one clone there
        pending = {pool.submit(train_run, chosen[n], a, s, run_dir): (n, a, s) for n, a, s in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                key = pending.pop(future)
                runs[key] = {**future.result(), "environment": where}
                record_run(key, runs[key], args.log)
    meta = {
        "quick": args.quick,
        "wall_s": time.perf_counter() - started,
        "load_avg_1_5_15_before": list(load_before),
        "load_avg_1_5_15_after": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "jobs": args.jobs,
        "skipped": skipped,
        "task_store": stored,
        "log": None if args.log is None else {"path": str(args.log), "runs_read": len(jobs) - len(todo)},
    }
    return write_results(chosen, {key: runs[key] for key in jobs}, meta, args.out, argv)


RUN_LINE = "credit-run"
"""Each finished run's stderr line starts with this, then ``[env, algo, seed, run]`` as JSON:
what ``--summarise`` reads back."""


def record_run(key: tuple[str, str, int], run: dict[str, Any], log: Path | None) -> None:
    """Prints a finished run's curves and its ``RUN_LINE`` on stderr and appends that line to
    ``log`` (one write per line, flushed and synced: a stopped invocation loses only the runs
    still training)."""
    curve = {k: [round(v, 3) for v in vs] for k, vs in run["curves"].items()}
    print("{} {} seed {}: ".format(*key) + f"{curve} ({run['wall_s']:.0f} s)", file=sys.stderr, flush=True)
    run_log.append(RUN_LINE, [*key, run], log)


def write_results(
    chosen: dict[str, Bench],
    runs: dict[tuple[str, str, int], dict[str, Any]],
    meta: dict[str, Any],
    out: Path,
    argv: list[str] | None,
) -> dict[str, Any]:
    """Summarises ``runs`` ((env, algo, seed) -> run, in the order to report) per env, writes
    ``credit.json`` and ``credit.png`` under ``out`` and prints the report."""
    details: dict[str, dict[str, Any]] = {}
    for name in dict.fromkeys(n for n, _, _ in runs):
        by_algo: dict[str, list[dict[str, Any]]] = {}
        for (n, algo, seed), run in runs.items():
            if n == name:
                by_algo.setdefault(algo, []).append({**run, "seed": seed})
        details[name] = summarise(chosen[name], by_algo)
    printed = report(details)
    results = {
        **printed,
        "critic_explained_variance": {env: d["critic_explained_variance"] for env, d in details.items()},
        "details": details,
        "meta": {
            "command": " ".join(
                ["python", "benchmarks/credit.py", *(argv if argv is not None else sys.argv[1:])]
            ),
            **meta,
            "torch_threads": 1,
            "trainer": "InProcessTrainer (one env runner + one learner, no Ray), one process per run",
            "steps_to_0_8": "env steps at which the IQM (over seeds) of held-out success first reaches 0.8",
            "steps_to_0_8_ci95": (
                "IQM over seeds of each seed's first evaluation at >= 0.8, 95% bootstrap CI; a seed "
                "that never reaches 0.8 (steps_to_0_8_never) counts as the budget: a lower bound"
            ),
            "executions": (
                "scored executions: env steps sampled (each executes and scores the team's spec) plus "
                "LEMON's counterfactual replays, from the end of the warm start, evaluations not counted"
            ),
            "executions_to_0_8": (
                "scored executions at which the IQM (over seeds) of held-out success first reaches 0.8, "
                "each seed counted at x with its last evaluation within x executions; null for runs "
                "logged without their executions"
            ),
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "credit.json").write_text(json.dumps(results, indent=2))
    plot(details, out / "credit.png")
    print(json.dumps(printed, indent=2))
    return results


def read_runs(logs: list[Path]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """(env, algo, seed) -> run from the ``RUN_LINE`` lines of earlier runs' stderr logs, ordered by
    env, algorithm (``ALGORITHMS`` order) and seed; a later log's run replaces an earlier one's."""
    order = [*ALGORITHMS, *LEMON_VARIANTS]
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for log, number, (env, algo, seed, run) in run_log.entries(logs, RUN_LINE, "env, algo, seed, run"):
        if algo not in order:
            raise SystemExit(f"{log}:{number}: unknown algorithm {algo!r}")
        runs[(env, algo, int(seed))] = run
    return dict(sorted(runs.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]), kv[0][2])))


def summarise_logs(logs: list[Path], quick: bool, out: Path, argv: list[str] | None) -> dict[str, Any]:
    """The figures of the runs that earlier invocations (e.g. one level or seed range each, or one
    cut short) finished, as one report: each algorithm over the seeds its runs cover."""
    missing = [str(log) for log in logs if not log.is_file()]
    if missing:
        raise SystemExit(f"--summarise: no such file: {', '.join(missing)}")
    runs = read_runs(logs)
    if not runs:
        raise SystemExit(f"--summarise: no '{RUN_LINE}' lines in {', '.join(map(str, logs))}")
    known = benches(quick)
    unknown = sorted({env for env, _, _ in runs} - set(known))
    if unknown:
        raise SystemExit(f"--summarise: runs of unknown envs {unknown} (with --quick? known: {list(known)})")
    seeds: dict[str, dict[str, list[int]]] = {}
    for env, algo, seed in runs:
        seeds.setdefault(env, {}).setdefault(algo, []).append(seed)
    meta = {"quick": quick, "summarised_from": [str(log) for log in logs], "seeds": seeds}
    return write_results(known, runs, meta, out, argv)


if __name__ == "__main__":
    main()
