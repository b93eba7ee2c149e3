"""BenchMARL's MAPPO on PettingZoo's simple_spread for a fixed budget of training wall time.

The peer run of ``benchmarks/spread_wallclock.py``: the same task (N=3, 25-step episodes,
local_ratio 0.5, discrete actions, one policy shared by the agents) trained by another MARL
platform, timed the same way: training seconds are collection plus optimisation, from the first
collection on; building the experiment and each greedy evaluation are timed apart. Every iteration
ends with a deterministic evaluation of ``--eval-episodes`` episodes, and its team return (rewards
summed over time and over the 3 agents, the figure ``spread_wallclock.py`` reports) goes on the
curve.

BenchMARL's own MAPPO and experiment defaults (its YAML files) are used unchanged apart from what
the comparison needs: the task's episode length, discrete actions, an evaluation every iteration,
no video, CSV logging in a temporary folder. They are BenchMARL's published settings, not tuned
for this budget (the orchestrl side is tuned for it; the report says so).

It runs in an environment with the ``peers`` requirements (``make peers``: BenchMARL needs
torchrl, which needs a newer torch than orchestrl's, and PettingZoo's MPE, which orchestrl's
PettingZoo no longer ships), so it imports nothing from orchestrl.

Printed: one JSON line per seed, ``{"seed", "budget_s", "build_s", "eval_s", "evaluations",
"curve": [[training seconds, env steps, greedy team return], ...], "settings"}``. An env step is
one step of the joint env (BenchMARL's "frame"), as in orchestrl's figures.

Run:
    .venv-peers/bin/python benchmarks/peers/benchmarl_spread.py --seeds 0 1 --budget-s 20
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

import torch
from benchmarl.algorithms import MappoConfig
from benchmarl.environments import PettingZooTask
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models.mlp import MlpConfig

TASK = {"task": "simple_spread_v3", "N": 3, "max_cycles": 25, "local_ratio": 0.5}


class _BudgetReached(Exception):
    """Raised from the callback to end training once the budget of training seconds is spent."""


class WallClock(Callback):
    """Times collection plus optimisation, records each evaluation, stops at the budget."""

    def __init__(self, budget_s: float) -> None:
        super().__init__()
        self.budget_s = budget_s
        self.train_s = 0.0
        self.eval_s = 0.0
        self.curve: list[list[float]] = []
        self.clock = 0.0  # perf_counter when the current stretch of training started

    def start(self) -> None:
        self.clock = time.perf_counter()

    def on_train_end(self, training_td: Any, group: str) -> None:
        now = time.perf_counter()
        self.train_s += now - self.clock
        self.clock = now  # from here to the evaluation's end is evaluation time

    def on_evaluation_end(self, rollouts: list[Any]) -> None:
        now = time.perf_counter()
        self.eval_s += now - self.clock
        groups = list(self.experiment.group_map)
        team = [float(sum(r.get(("next", g, "reward")).sum() for g in groups)) for r in rollouts]
        self.curve.append(
            [round(self.train_s, 3), int(self.experiment.total_frames), round(sum(team) / len(team), 3)]
        )
        if self.train_s >= self.budget_s:
            raise _BudgetReached
        self.clock = time.perf_counter()


def one_run(seed: int, budget_s: float, eval_episodes: int, threads: int) -> dict[str, Any]:
    torch.set_num_threads(threads)
    config = ExperimentConfig.get_from_yaml()
    config.sampling_device = config.train_device = config.buffer_device = "cpu"
    config.prefer_continuous_actions = False
    config.max_n_iters, config.max_n_frames = 10**6, None
    config.evaluation = True
    config.evaluation_interval = config.on_policy_collected_frames_per_batch
    config.evaluation_episodes = eval_episodes
    config.render = False
    config.loggers, config.create_json = ["csv"], False
    config.save_folder = tempfile.mkdtemp(prefix="benchmarl-spread-")
    config.checkpoint_interval, config.checkpoint_at_end = 0, False
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update(TASK)
    clock = WallClock(budget_s)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    experiment = Experiment(
        task=task,
        algorithm_config=MappoConfig.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=seed,
        config=config,
        callbacks=[clock],
    )
    build_s = time.perf_counter() - started
    clock.start()
    try:
        experiment.run()
    except _BudgetReached:
        pass  # run() has closed the experiment (it prints "Experiment failed": the budget's stop)
    return {
        "seed": seed,
        "budget_s": budget_s,
        "load_avg_1_before": round(load_before, 2),
        "build_s": round(build_s, 3),
        "eval_s": round(clock.eval_s, 3),
        "evaluations": len(clock.curve),
        "curve": clock.curve,
        "settings": {
            "platform": "BenchMARL",
            "algorithm": "mappo (BenchMARL defaults)",
            "task": TASK,
            "frames_per_batch": config.on_policy_collected_frames_per_batch,
            "minibatch_size": config.on_policy_minibatch_size,
            "minibatch_iters": config.on_policy_n_minibatch_iters,
            "lr": config.lr,
            "gamma": config.gamma,
            "torch_threads": threads,
        },
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget-s", type=float, default=60.0, help="training seconds per seed")
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (orchestrl's runs use 1)")
    args = parser.parse_args(argv)
    for seed in args.seeds:
        print(json.dumps(one_run(seed, args.budget_s, args.eval_episodes, args.threads)), flush=True)


if __name__ == "__main__":
    main()
