"""LEMON's planning team (``orchestration_planning``) on generated held-out tasks, beside the
synthesiser and trivial teams on the same tasks, and how much an agent's observation gives away.

On ``--tasks`` held-out tasks of the planning env (exports drawn from the grammar's domains, split
``heldout``: seeds the training split never draws):

- ``team_success_at_k`` (per ``--checkpoint``, greedy): the team's spec after ``k`` rounds, one
  scored execution each, is the wanted table (``k`` = 1 .. the env's rounds);
- ``solver_success``: the synthesiser (its search on the public inputs, its pipeline run once);
- ``first_option_team_success``: every agent takes its list's first option (no filter, the
  plainest cleaning and join); ``random_team_success``: every agent one option at random;
- ``linear_probe_accuracy``: a logistic regression from one agent's first-round observation to its
  label (the generator's decision), fit on ``--probe-tasks`` training tasks and scored on the
  held-out tasks' agents, joint over the team; ``constant_baseline_accuracy``: each agent's most
  frequent training label, jointly.

Success rates come with 95% bootstrap CIs over tasks. Run::

    python benchmarks/planning.py --quick
    python benchmarks/planning.py --checkpoint <run id or checkpoint> [--checkpoint ...]

Figures: ``benchmarks/RESULTS.md``, section "LEMON planning team". The same teams on exports
written by hand: ``benchmarks/plan.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe import fit_probe

from orchestrl.envs.orchestration.planning.choices import AGENTS
from orchestrl.envs.orchestration.planning.env import PlanningEnv, same_output
from orchestrl.envs.orchestration.planning.grammar import generate
from orchestrl.envs.spaces import OBS_KEY

FULL = {"tasks": 200, "probe_tasks": 600}
QUICK = {"tasks": 12, "probe_tasks": 30}


def rate(hits: list[bool], seed: int = 0) -> dict[str, float]:
    """Mean and 95% bootstrap CI of a success rate over tasks."""
    values = np.asarray(hits, dtype=float)
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(2000, len(values))).mean(1) if len(values) else np.zeros(1)
    return {
        "mean": float(values.mean()) if len(values) else 0.0,
        "ci": [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))],
    }


def team_rounds(env: PlanningEnv, policy: Any, task: Any) -> list[bool]:
    """Whether the team's spec after each round is the wanted table."""
    obs, _ = env.reset(options={"task": task})
    hits = []
    for _ in range(env.rounds):
        obs, _, _, _, infos = env.step(policy.act(obs))
        hits.append(next(iter(infos.values()))["score"] >= 1.0)
    return hits


def fixed_team(env: PlanningEnv, task: Any, actions: dict[str, int]) -> bool:
    env.reset(options={"task": task})
    spec, _, _ = env.write(actions)
    return same_output(env.execute(spec), task.target)


def probe(env: PlanningEnv, probe_tasks: int, heldout: list[Any]) -> dict[str, float]:
    def rows(tasks: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        x, y = [], []
        for task in tasks:
            obs, _ = env.reset(options={"task": task})
            for agent in AGENTS:
                x.append(obs[agent][OBS_KEY])
                y.append([task.reference[agent]])
        return np.array(x), np.array(y)

    train_x, train_y = rows([generate("train", s) for s in range(probe_tasks)])
    test_x, test_y = rows(heldout)
    predicted, constant = fit_probe(train_x, train_y, test_x)
    hits = (predicted[:, 0] == test_y[:, 0]).reshape(-1, len(AGENTS))
    constant = (constant[:, 0] == test_y[:, 0]).reshape(-1, len(AGENTS))
    return {
        "linear_probe_accuracy": float(hits.all(1).mean()),
        "linear_probe_agent_accuracy": float(hits.mean()),
        "constant_baseline_accuracy": float(constant.all(1).mean()),
        "constant_baseline_agent_accuracy": float(constant.mean()),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", action="append", default=[], help="run id or checkpoint (repeatable)")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--probe-tasks", type=int)
    parser.add_argument("--out", default="runs/bench/planning.json")
    args = parser.parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    sizes.update({k: v for k, v in (("tasks", args.tasks), ("probe_tasks", args.probe_tasks)) if v})
    started = time.perf_counter()
    env = PlanningEnv(split="heldout", rounds=2, reference_metrics=True)
    tasks = [generate("heldout", s) for s in range(sizes["tasks"])]
    out: dict[str, Any] = {**sizes, "rounds": env.rounds}
    try:
        solver, first, lucky = [], [], []
        rng = np.random.default_rng(0)
        for task in tasks:
            env.reset(options={"task": task})
            env.step({a: np.array([0]) for a in AGENTS})
            *_, infos = env.step({a: np.array([0]) for a in AGENTS})
            metrics = next(iter(infos.values()))["metrics"]  # an episode of every agent's first option
            solver.append(metrics["solver_success"] >= 1.0)
            first.append(metrics["success"] >= 1.0)
            pick = {a: int(rng.integers(len(task.choices.options[a]))) for a in AGENTS}
            lucky.append(fixed_team(env, task, pick))
        out["solver_success"] = rate(solver)
        out["first_option_team_success"] = rate(first)
        out["random_team_success"] = rate(lucky)
        out["teams"] = {}
        for checkpoint in args.checkpoint:
            from orchestrl.deploy.team import find_team

            team = find_team(checkpoint)
            policy = team.policy(team.rllib_config("train"))
            per_round = np.array([team_rounds(env, policy, task) for task in tasks])
            out["teams"][checkpoint] = {
                "team_success_at_k": {str(k + 1): rate(list(per_round[:, k])) for k in range(env.rounds)}
            }
        out.update(probe(env, sizes["probe_tasks"], tasks))
    finally:
        env.close()
    out["seconds"] = round(time.perf_counter() - started, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
