"""Counterfactual credit (LEMON replay, COMA) against IPPO and MAPPO: held-out success vs env steps.

What it runs: ippo, mappo, coma and lemon (``advantage: replay``; only on envs with a
counterfactual API) with 5 seeds each and equal env-step budgets, in-process (InProcessTrainer, no
Ray, one torch thread), two runs at a time (``--jobs``), on

- ``orchestration_l2`` / ``orchestration_l3``: the LEMON env at levels 2 (3 agents) and 3
  (5 agents), 2 rounds per episode, one shared team reward, trained on the train split's first
  1,000 tasks. Every algorithm starts from the same warm start (``warm_start:``, the env's expert
  cloned into the actor on 100 training tasks for 6 epochs: LEMON's supervised start on valid
  specs, kept short so that no run starts at the threshold), then PPO with the same settings (250
  env steps per iteration, lr 5e-4, no entropy bonus; coma with its sampled-return Q term,
  per-agent centring and fitted baseline scale, see ``benches``). Budgets: 4,000 (level 2) and
  16,000 (level 3) env steps, the latter long enough that reaching 0.8 within half of it is a
  claim about ippo and mappo too. The greedy policy is evaluated right after the warm start and
  every 1,000 env steps on the same 30 held-out tasks; metric: held-out success (the held-out
  team return, summed over agents, is reported too);
- ``simple_spread``: MPE, N=3, 25-step episodes, ``local_ratio=0`` (one shared team reward for
  every algorithm), from scratch; budget 30,000 env steps; metric: team return of the sampled
  policy on 10 fresh episodes, SUMMED over the 3 agents (no success threshold: ``steps_to_0_8``
  is null).

Reported per env (JSON keyed by env name): ``final_iqm`` / ``ci95`` (IQM over seeds of the last
evaluation, 95% stratified-bootstrap CI, ``orchestrl.tracking.stats``), ``steps_to_0_8`` (env steps
at which the IQM curve first reaches 0.8, null if never) and per seed, with ``steps_to_0_8_ci95``
(the IQM over seeds of those per-seed steps, a seed that never reaches 0.8 counted at the budget:
a lower bound), the IQM curves with their bands, ``critic_explained_variance`` (IQM over seeds of
each run's mean, over its updates, of RLlib's ``vf_explained_var``: how much of the value targets'
variance the critic explains; for coma that critic is Q(s, u) of the taken joint action),
``p_improvement_vs_ippo`` (algorithm -> [P(X > ippo), 95% CI]: how often a run of X ends above a
run of ippo; 0.5 is a match) and ``lemon_counterfactual_cost``: extra executions, node re-runs and
their wall time against the rest of LEMON's training time, next to LEMON's reported +12%.

Run:
    .venv/bin/python benchmarks/credit.py --quick     # 2 seeds, level 2 (2,000 steps) + spread: 2 min
    .venv/bin/python benchmarks/credit.py             # the full benchmark
    .venv/bin/python benchmarks/credit.py --envs orchestration_l3 --algos ippo coma --seeds 10 \
        --out runs/bench/credit_l3_coma_ippo           # coma against ippo at level 3, 10 seeds
It prints the JSON and writes ``credit.json`` + ``credit.png`` under ``--out``
(default ``runs/bench/credit``).

Expected (measured 2026-12-01 on the 2-core machine; full run 48.7 min):

- orchestration level 3, held-out success IQM [95% CI] after 16,000 env steps, from 0.53 after
  the warm start: lemon 0.91 [0.87, 0.99], coma 0.71 [0.60, 0.79], mappo 0.52 [0.38, 0.59], ippo
  0.36 [0.30, 0.40]; P(coma > ippo) 1.00 [1.00, 1.00]. lemon's IQM curve reaches 0.8 at 6,000 env
  steps (per seed 5,000 / 6,000 / 6,000 / 10,000 / 7,000; IQM 6,333 [5,333, 9,000]); coma on 1
  seed (at 16,000), ippo and mappo on none. All four first fall below the warm start (0.29-0.38
  after 1,000 env steps); lemon climbs back from 2,000 on, coma and mappo in the second half.
  Critic explained variance: mappo 0.44, ippo 0.43, lemon 0.28, coma 0.18;
- level 2 after 4,000 env steps, from 0.47: lemon 0.78 [0.58, 0.83], ippo 0.46 [0.37, 0.76], mappo
  0.42 [0.30, 0.50], coma 0.38 [0.33, 0.50]; none reaches 0.8 (lemon on 2 of 5 seeds, ippo on 1);
- simple_spread, sampled-policy team return IQM: ippo -142.8 [-156.5, -138.8], mappo -147.4
  [-156.5, -139.0], coma -156.9 [-191.6, -149.5] (coma trails mappo, as in the literature);
- LEMON's counterfactual cost: 3.0 (level 2) and 4.6 (level 3) extra spec executions per episode,
  0.9 / 1.4 nodes actually re-run per execution thanks to the node cache, and +30% / +61% wall
  time over the rest of LEMON's runs (LEMON reports +12%; the cached task pool makes the rest
  of a run cheap, so the replays' share grows).

Runs are not bit-reproducible (sandbox timing feeds the reward): the two previous full runs, before
coma's ``fit_baseline_scale``, gave at level 3 lemon 0.92 / 0.91, mappo 0.52 / 0.40, ippo 0.43 /
0.46 and coma 0.34 / 0.41. The 10-seed coma-against-ippo run
(``--envs orchestration_l3 --algos ippo coma --seeds 10``, 35.5 min): coma 0.71 [0.64, 0.78], ippo
0.35 [0.27, 0.45], P(coma > ippo) 0.975 [0.90, 1.00]; coma reaches 0.8 on 3 of 10 seeds, ippo on
none; critic explained variance coma 0.09, ippo 0.44. Before ``fit_baseline_scale`` the same
command gave coma 0.44 [0.30, 0.51], ippo 0.47 [0.41, 0.54].
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ALGORITHMS = ("ippo", "mappo", "coma", "lemon")
THRESHOLD = 0.8
TASK_POOL = 1000
"""Orchestration runs train on the train split's first 1,000 tasks (generated tables and node
outputs stay cached: several times faster sampling); evaluation stays on held-out tasks."""


@dataclass(frozen=True)
class Bench:
    """One env of the benchmark and its fixed training settings (the same for every algorithm)."""

    env: str
    kwargs: dict[str, Any]
    eval_overrides: dict[str, Any]
    metric: str
    """``success`` (the env's info metric; the team return is reported too) or ``return``."""
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

    @property
    def budget(self) -> int:
        return self.iterations * self.batch


def benches(quick: bool) -> dict[str, Bench]:
    # Every algorithm starts from the same warm start (the expert cloned on 100 training tasks for 6
    # epochs: LEMON's "supervised on valid specs"), then PPO without an entropy bonus (it would
    # only undo the cloning). Short on purpose: measured at level 3, seeds 0-2, held-out success
    # after cloning alone was 0.17 / 0.07 / 0.03 (4 epochs), 0.37 / 0.30 / 0.20 (5) and
    # 0.87 / 0.77 / 0.80 (8): at 8 the threshold is reached before any RL.
    orch_training = {"lr": 5e-4, "num_epochs": 8, "minibatch_size": 250, "entropy_coeff": 0.0}
    # COMA's Q(s,u) term is the sampled TD(lambda) return, its critic gives the counterfactual
    # baseline, and the advantages are centred per agent, then scaled. Measured at level 3, seed 0,
    # 8,000 env steps from a warm start at 0.70: with the critic's own Q it fell to 0.00 (critic
    # warm-up 4 or 8); the sampled return without centring to 0.17 (unscaled) / 0.33 (scaled).
    # Over seeds 0-4 at 12,000 env steps, centred over the whole batch it ended at 0.27 / 0.37 /
    # 0.27 / 0.13 / 0.37 (ippo 0.47 / 0.47 / 0.30 / 0.30 / 0.33), centred per agent 0.43 / 0.60 / 0.37
    # / 0.17 / 0.47. Probed since at 16,000 env steps, none better (final success on seeds 0-4,
    # or on the weakest seeds 2 and 3, whose per-agent-centred results were 0.50 / 0.20 before):
    # regressing the baseline itself onto the returns 0.40 / 0.67 / 0.17 / 0.30 / 0.40; with
    # td_lambda 0.95 too, seeds 0-3 0.43 / 0.53 / 0.23 / 0.07; on seeds 2 / 3 critic_lr 3e-3
    # 0.33 / 0.20, the critic reading the agent's own observation instead of the global state
    # 0.27 / 0.17, and a joint (non-factorised) Q head with a sampled baseline 0.37 / 0.20. Probed
    # later, seeds 0-4 (this setting's run: 0.33 / 0.47 / 0.50 / 0.23 / 0.23): the critic also fitted
    # on the last 12 batches' targets before each update 0.73 / 0.30 / 0.50 / 0.20 / 0.43; critic
    # warm-up 4, seeds 0-3, 0.23 / 0.50 / 0.33 / 0.20; every agent's sampling-time action
    # probabilities as extra critic input, seeds 0-3, 0.50 / 0.43 / 0.27 / 0.17; the critic's own
    # Q with a conservative (CQL) penalty on untried actions 0.00 on seeds 0 and 1. Adopted since:
    # each agent's baseline scaled by its fitted control-variate coefficient (fit_baseline_scale;
    # median fitted value 0.65, 80% of them in 0.49-0.80), seeds 0-4 0.80 / 0.70 / 0.73 / 0.43 / 0.63.
    orch_knobs = {
        "coma": {
            "critic_warmup": 1,
            "q_source": "lambda_return",
            "normalize_advantages": True,
            "center_advantages": True,
            "fit_baseline_scale": True,
        }
    }
    spread_training = {"lr": 7e-4, "num_epochs": 5, "minibatch_size": 1000, "entropy_coeff": 0.01}
    iterations = {2: 8} if quick else {2: 16, 3: 64}
    out = {
        f"orchestration_l{level}": Bench(
            env="orchestration",
            kwargs={"level": level, "task_pool": TASK_POOL},
            eval_overrides={"split": "heldout"},
            metric="success",
            iterations=iterations[level],
            batch=250,
            eval_every=2 if quick else 4,
            eval_episodes=30,
            eval_explore=False,
            envs_per_runner=4,
            training=orch_training,
            algo_knobs=orch_knobs,
            hidden=(256, 256),
            warm_start={"episodes": 100, "epochs": 6},
        )
        for level in ((2,) if quick else (2, 3))
    }
    out["simple_spread"] = Bench(
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
        algo_knobs={"coma": {"critic_warmup": 2}},
    )
    return out


def experiment(bench: Bench, algo: str, seed: int) -> dict[str, Any]:
    return {
        "name": f"credit_{bench.env}_{algo}",
        "seed": seed,
        "env": {"name": bench.env, "kwargs": dict(bench.kwargs)},
        "algorithm": {"name": algo, **bench.algo_knobs.get(algo, {})},
        "model": {"hidden": list(bench.hidden)},
        "warm_start": dict(bench.warm_start),
        "resources": {"env_runners": 0, "envs_per_env_runner": bench.envs_per_runner},
        "training": {"train_batch_size": bench.batch, **bench.training},
        "evaluation": {"episodes": bench.eval_episodes, "env_overrides": dict(bench.eval_overrides)},
    }


def sample(runner: Any, steps: int, chunk: int = 64) -> list:
    """``steps`` env steps in chunks: RLlib 2.60 numpy-fies every finished episode of a ``sample()``
    call once per env step, quadratic in episodes per call (measured: 400 one-step episodes in one
    call 2.4 s, in 8 calls 0.5 s)."""
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
            success.append(float(metrics.get("success", 0.0)))
        out["success"] = float(np.mean(success))
    return out


COST_KEYS = {
    "executions": "executions",
    "seconds": "time_s",
    "nodes_run": "nodes_run",
    "episodes": "episodes",
}


def train_run(bench: Bench, algo: str, seed: int) -> dict[str, Any]:
    from ray.rllib.algorithms.ppo.ppo import LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY as VF_EXPLAINED_VAR
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.inprocess import InProcessTrainer

    started = time.perf_counter()
    ppo = build_ppo_config(validate_config(experiment(bench, algo, seed)))
    trainer = InProcessTrainer(ppo)
    evaluator = MultiAgentEnvRunner(config=ppo.get_evaluation_config_object())
    points: list[int] = []
    curves: dict[str, list[float]] = {}
    steps, cost = 0, dict.fromkeys(COST_KEYS, 0.0)
    critic_ev: list[float] = []  # per update: how much of the value targets' variance the critic explains
    try:
        if trainer.warm_start:  # where RL starts from: the cloned policy, before any env step
            points.append(0)
            for key, value in evaluate(bench, evaluator, trainer.learner).items():
                curves.setdefault(key, []).append(value)
        for iteration in range(1, bench.iterations + 1):
            episodes = sample(trainer.runner, bench.batch)
            steps += sum(len(ep) for ep in episodes)
            learned = trainer.update(episodes)
            explained = [m[VF_EXPLAINED_VAR] for m in learned.values() if VF_EXPLAINED_VAR in m]
            critic_ev.append(float(np.mean(explained)))
            metrics = trainer.runner.get_metrics()
            for key, name in COST_KEYS.items():
                stat = metrics.get(f"env/cf_{name}")
                cost[key] += float(stat.peek()) if hasattr(stat, "peek") else 0.0
            if iteration % bench.eval_every == 0 or iteration == bench.iterations:
                points.append(iteration * bench.batch)
                for key, value in evaluate(bench, evaluator, trainer.learner).items():
                    curves.setdefault(key, []).append(value)
    finally:
        trainer.stop()
        evaluator.stop()
    return {
        "steps": points,
        "curves": curves,
        "env_steps_sampled": steps,
        "wall_s": time.perf_counter() - started,
        "cost": cost,
        "critic_ev": critic_ev,
    }


def first_reach(steps: list[int], values: list[float]) -> int | None:
    return next((s for s, v in zip(steps, values, strict=True) if v >= THRESHOLD), None)


def curve_summary(runs: list[dict[str, Any]], key: str) -> dict[str, list[float]]:
    from orchestrl.tracking.stats import curve_band

    band = curve_band([dict(zip(r["steps"], r["curves"][key], strict=True)) for r in runs], seed=0)
    return {
        "steps": [p.step for p in band],
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


def summarise(bench: Bench, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    success = bench.metric == "success"
    out: dict[str, Any] = {
        "metric": "held-out success"
        if success
        else "team return of the sampled policy (sum over 3 agents, 25-step episodes)",
        "budget_env_steps": bench.budget,
        "seeds": len(next(iter(runs.values()))),
        "steps_to_0_8": {},
        "steps_to_0_8_per_seed": {},
        "steps_to_0_8_seed_iqm": {},
        "steps_to_0_8_ci95": {},
        "steps_to_0_8_never": {},
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
        if success:
            curve = out["curves"][algo]
            out["steps_to_0_8"][algo] = first_reach(curve["steps"], curve["iqm"])
            reach = [first_reach(r["steps"], r["curves"]["success"]) for r in algo_runs]
            out["steps_to_0_8_per_seed"][algo] = reach
            # never reached: counted at the budget, so this interval is a lower bound for that algorithm
            steps = [bench.budget if s is None else s for s in reach]
            put_iqm(out, "steps_to_0_8_seed_iqm", "steps_to_0_8_ci95", algo, steps)
            out["steps_to_0_8_never"][algo] = sum(s is None for s in reach)
            returns = [r["curves"]["return"][-1] for r in algo_runs]
            put_iqm(out, "final_iqm_return", "ci95_return", algo, returns)
            out["curves_return"][algo] = curve_summary(algo_runs, "return")
        else:
            out["steps_to_0_8"][algo] = None
    if "ippo" in runs:
        out["p_improvement_vs_ippo"] = improvement_over(out["final_per_seed"], "ippo")
    if "lemon" in runs:
        out["lemon_counterfactual_cost"] = lemon_cost(runs["lemon"])
    return out


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


def lemon_cost(runs: list[dict[str, Any]]) -> dict[str, float]:
    """LEMON's extra executions and their time, against its own training wall time."""
    cost = {k: float(np.sum([r["cost"][k] for r in runs])) for k in COST_KEYS}
    wall = float(np.sum([r["wall_s"] for r in runs]))
    return {
        "extra_executions": cost["executions"],
        "extra_executions_per_episode": cost["executions"] / max(cost["episodes"], 1.0),
        "nodes_rerun": cost["nodes_run"],
        "counterfactual_seconds": cost["seconds"],
        "lemon_wall_seconds": wall,
        "time_overhead": cost["seconds"] / max(wall - cost["seconds"], 1e-9),
        "lemon_paper_time_overhead": 0.12,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    for env, res in results.items():
        if isinstance(res, dict) and "curves" in res:
            panels.append((env, res["curves"], res["metric"]))
            if "curves_return" in res:
                panels.append((env, res["curves_return"], "held-out team return (sum over agents)"))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (env, curves, metric) in zip(axes[0], panels, strict=True):
        for algo, c in curves.items():
            (line,) = ax.plot(c["steps"], c["iqm"], marker="o", ms=3, label=algo)
            ax.fill_between(c["steps"], c["low"], c["high"], alpha=0.2, color=line.get_color())
        if metric == "held-out success":
            ax.axhline(THRESHOLD, ls=":", c="grey", lw=1)
            ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{env} ({results[env]['seeds']} seeds, IQM, 95% CI)", fontsize=9)
        ax.set_xlabel("env steps")
        ax.set_ylabel(metric.split(" (")[0], fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds, small budgets (~2 minutes)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per algorithm (default 5; quick 2)")
    parser.add_argument("--envs", nargs="*", default=None, help="subset of envs to run")
    parser.add_argument(
        "--algos", nargs="*", choices=ALGORITHMS, default=None, help="subset of algorithms to run"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/credit"))
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once (one process each)")
    args = parser.parse_args(argv)
    known = list(benches(args.quick))
    unknown = sorted(set(args.envs or ()) - set(known))
    if unknown:
        mode = " with --quick" if args.quick else ""
        parser.error(f"--envs: unknown env{mode}: {', '.join(unknown)} (known: {', '.join(known)})")

    from orchestrl.envs.counterfactual import supports_counterfactual
    from orchestrl.envs.registry import get_env
    from orchestrl.training.runtime import quiet_environment, silence_noise, worker_pool

    args.out.mkdir(parents=True, exist_ok=True)
    quiet_environment(args.out)
    silence_noise(False)
    seeds = args.seeds or (2 if args.quick else 5)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    jobs: list[tuple[str, str, int]] = []
    chosen = {n: b for n, b in benches(args.quick).items() if not args.envs or n in args.envs}
    for name, bench in chosen.items():
        try:
            env_class = get_env(bench.env).load()
        except Exception as exc:
            results[name] = {"skipped": f"{type(exc).__name__}: {exc}"}
            continue
        algos = [a for a in args.algos or ALGORITHMS if a != "lemon" or supports_counterfactual(env_class)]
        jobs += [(name, algo, seed) for algo in algos for seed in range(seeds)]
    runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    with worker_pool(max(1, args.jobs), args.out) as pool:
        pending = {pool.submit(train_run, chosen[n], a, s): (n, a, s) for n, a, s in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                key = pending.pop(future)
                runs[key] = run = future.result()
                curve = {k: [round(v, 3) for v in vs] for k, vs in run["curves"].items()}
                line = "{} {} seed {}: ".format(*key) + f"{curve} ({run['wall_s']:.0f} s)"
                print(line, file=sys.stderr, flush=True)
    for name in dict.fromkeys(n for n, _, _ in jobs):
        by_algo: dict[str, list[dict[str, Any]]] = {}
        for n, algo, seed in jobs:
            if n == name:
                by_algo.setdefault(algo, []).append(runs[(n, algo, seed)])
        results[name] = summarise(chosen[name], by_algo)
    results["meta"] = {
        "command": " ".join(
            ["python", "benchmarks/credit.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "quick": args.quick,
        "wall_s": time.perf_counter() - started,
        "cpus": os.cpu_count(),
        "torch_threads": 1,
        "jobs": args.jobs,
        "trainer": "InProcessTrainer (one env runner + one learner, no Ray), one process per run",
        "steps_to_0_8": "env steps at which the IQM (over seeds) of held-out success first reaches 0.8",
        "steps_to_0_8_ci95": (
            "IQM over seeds of each seed's first evaluation at >= 0.8, 95% bootstrap CI; a seed that "
            "never reaches 0.8 (steps_to_0_8_never) counts as the budget: a lower bound"
        ),
    }
    (args.out / "credit.json").write_text(json.dumps(results, indent=2))
    plot(results, args.out / "credit.png")
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
