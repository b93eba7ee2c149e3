"""Calibration of the LEMON orchestration env: how hard each level is, and how much an agent's
observation gives away.

Per level, on held-out tasks:

- ``random_team_success``: a uniformly random team (every agent samples each action component
  uniformly among the allowed values), one round, ``--random-teams`` teams per task;
- ``solver_success`` / ``solver_seconds_per_task``: the solver (``orchestrl/envs/orchestration/
  solver.py``: a search over the public inputs, each plan checked against the example rows in the
  sandbox), scored against the whole hidden target; seconds are wall time per task, sandbox
  executions included (``solver_executions_per_task``);
- ``solver_success_at_k``: ``solver_k``, the same search stopped after ``k`` executions (its
  answer: the first plan that held every example row, else the one that held the most), for each
  ``k`` of :data:`AT_K`: the baseline a team gets at the same number of scored executions;
- ``plan_space_size``: the number of distinct plans in the search's space (the solver's enumeration
  of the level's skeleton filled with the proposed candidates, schema-pruned, plus stage moves;
  :func:`~orchestrl.envs.orchestration.solver.plan_space`), counted up to :data:`PLAN_SPACE_CAP`
  per task: the median over held-out tasks, with the smallest (``plan_space_size_min``): what a
  search at a budget of executions has to choose from;
- ``multi_plan_share``: the share of tasks where a search (the solver's enumeration plus stage
  moves, in-process, at most ``--plan-limit`` plans) finds two or more distinct plans that produce
  the target (``mean_successful_plans``: how many on average);
- ``linear_probe_accuracy``: a logistic regression per action component, from one agent's
  first-round observation to the solver's action for that agent, fit on ``--train-tasks`` training
  tasks and scored on the held-out tasks' agents: the share of agents whose whole action (all five
  components) it gets right; ``linear_probe_component_accuracy`` per component and
  ``constant_baseline_accuracy`` (the most frequent training action, per component, then jointly)
  for scale. An observation that copies the answer would score 1.0 here; a figure well below
  1.0 means the action must be inferred from the public inputs, not read off. The observation
  carries nothing of the solver's conclusions (no prior, candidates in canonical order);
- ``linear_probe_without``: the same probe refit with parts of the observation removed
  (:func:`probe_ablations`): the candidates' agreement with the example rows, their name matches
  with the target, the rest of their numbers, all of them, the whole candidate block, and
  everything but the agent's slot: what the probe reads, measured rather than presumed.

Run::

    .venv/bin/python benchmarks/orchestration_env.py --quick   # small samples
    .venv/bin/python benchmarks/orchestration_env.py           # 2,000 probe tasks per level

Measured: ``benchmarks/RESULTS.md``, section "LEMON env calibration".

It prints one JSON object (``levels`` keyed by level number, plus the settings, the load average
and the seconds it took) and writes it to ``--out`` (default ``runs/bench/orchestration_env.json``).
Levels run two at a time in spawned worker processes, each with its own sandbox pool. ``--update``
measures the levels given and keeps the others an earlier run with the same settings wrote to
``--out``, so the full run can be split over invocations.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe import linear_probe

from orchestrl.envs.orchestration.tasks import LEVELS

FULL = {"train_tasks": 2000, "heldout_tasks": 200, "random_teams": 20, "plan_limit": 150}
AT_K = (1, 2, 3, 5, 10, 50)
"""Execution budgets of ``solver_success_at_k``."""
PLAN_SPACE_CAP = 100_000
"""Plans counted per task at most (``plan_space_size``)."""
QUICK = {"train_tasks": 60, "heldout_tasks": 12, "random_teams": 10, "plan_limit": 40}
EXAMPLE_AGREEMENT = ("evidence", "checkable", "agree", "surprise")
"""The candidate numbers that check a candidate against the example rows."""
NAMES = (
    "reads_in_target",
    "writes_target_column",
    "writes_aggregated_column",
    "yields_target_columns",
    "unknown_columns",
)
"""The candidate numbers that match the columns a candidate reads and writes to the target's names."""


def probe_ablations(builder: Any) -> dict[str, list[int]]:
    """The observation columns each ablation of ``linear_probe_without`` removes: the candidates'
    agreement with the examples, their name matches, the rest of their numbers (the data's
    profile), all their numbers, the whole candidate block, and everything but the agent's slot."""
    from orchestrl.envs.orchestration.analysis import CANDIDATE_NUMBERS

    data = tuple(n for n in CANDIDATE_NUMBERS if n not in EXAMPLE_AGREEMENT + NAMES)
    offsets = builder.offsets()
    slot = offsets["slot"]
    return {
        "example_agreement": builder.candidate_number_columns(EXAMPLE_AGREEMENT),
        "names": builder.candidate_number_columns(NAMES),
        "data_profile": builder.candidate_number_columns(data),
        "candidate_numbers": builder.candidate_number_columns(CANDIDATE_NUMBERS),
        "candidates": list(range(offsets["candidates"].start, offsets["candidates"].stop)),
        "all_but_slot": [i for i in range(builder.size) if not slot.start <= i < slot.stop],
    }


def level_figures(
    level: int, train_tasks: int, heldout_tasks: int, random_teams: int, plan_limit: int
) -> dict:
    """Every figure of one level (runs in a worker process)."""
    from orchestrl.envs.orchestration.env import OrchestrationEnv
    from orchestrl.envs.orchestration.sandbox.pool import close_shared_pool
    from orchestrl.envs.orchestration.solver import answer_at, plan_space, successful_plans
    from orchestrl.envs.orchestration.spec import SpecError, parse_spec
    from orchestrl.envs.spaces import OBS_KEY

    started = time.perf_counter()
    rng = np.random.default_rng(level)
    heldout = OrchestrationEnv(level=level, rounds=1, split="heldout")
    solved, seconds, executions, lucky, plans, space = [], [], [], [], [], []
    at_k: dict[int, list[float]] = {k: [] for k in AT_K}
    test_x, test_y = [], []
    for seed in range(heldout_tasks):
        obs, _ = heldout.reset(seed=seed)
        task = heldout.task
        solution = heldout.solution()
        seconds.append(solution.seconds)
        executions.append(solution.executions)
        solved.append(heldout.evaluate(solution.spec).success if solution.spec is not None else 0.0)
        trace = heldout.search_trace(max(AT_K))
        scores: dict[int, float] = {}  # id of an attempt -> its success (evaluated once)
        for k in AT_K:
            answer = answer_at(trace, k)
            if answer is None:
                at_k[k].append(0.0)
                continue
            if id(answer) not in scores:
                scores[id(answer)] = heldout.evaluate(answer.spec).success
            at_k[k].append(scores[id(answer)])
        actions = heldout.expert_actions()
        for agent in heldout.agents:
            test_x.append(obs[agent][OBS_KEY])
            test_y.append(actions[agent])
        for _ in range(random_teams):
            team = {
                a: _uniform(heldout.layout, task, slot, rng) for slot, a in enumerate(heldout.possible_agents)
            }
            try:
                lucky.append(heldout.evaluate(parse_spec(heldout.layout.decode(task, team))).success)
            except SpecError:
                lucky.append(0.0)
        plans.append(len(successful_plans(task, limit=plan_limit)))
        space.append(sum(1 for _ in itertools.islice(plan_space(task), PLAN_SPACE_CAP)))
    ablations = probe_ablations(heldout.builder)
    heldout.close()
    train = OrchestrationEnv(level=level, rounds=1, split="train")
    train_x, train_y = [], []
    for seed in range(train_tasks):
        obs, _ = train.reset(seed=seed)
        actions = train.expert_actions()
        for agent in train.agents:
            train_x.append(obs[agent][OBS_KEY])
            train_y.append(actions[agent])
    train.close()
    close_shared_pool()
    probe = linear_probe(
        np.array(train_x), np.array(train_y), np.array(test_x), np.array(test_y), without=ablations
    )
    return {
        "random_team_success": float(np.mean(lucky)),
        "solver_success": float(np.mean(solved)),
        "solver_seconds_per_task": float(np.mean(seconds)),
        "solver_executions_per_task": float(np.mean(executions)),
        "solver_success_at_k": {str(k): float(np.mean(v)) for k, v in at_k.items()},
        "plan_space_size": float(np.median(space)),
        "plan_space_size_min": int(min(space)),
        "multi_plan_share": float(np.mean([p >= 2 for p in plans])),
        "mean_successful_plans": float(np.mean(plans)),
        **probe,
        "heldout_tasks": heldout_tasks,
        "probe_train_tasks": train_tasks,
        "seconds": time.perf_counter() - started,
    }


def _uniform(layout: Any, task: Any, slot: int, rng: np.random.Generator) -> np.ndarray:
    """Each component uniformly among the values the mask allows."""
    mask = layout.mask(task, slot)
    parts = np.split(mask, np.cumsum(layout.nvec)[:-1])
    return np.array([int(rng.choice(np.flatnonzero(p))) for p in parts], dtype=np.int64)


def kept_levels(out: Path, settings: dict, error: Any) -> dict[str, Any]:
    """The levels an earlier run wrote to ``out`` (``--update``), which must have used ``settings``;
    ``error`` (the parser's) exits naming the file otherwise."""
    if not out.exists():
        return {}
    try:
        earlier = json.loads(out.read_text())
        levels, used = dict(earlier["levels"]), earlier["settings"]
    except (ValueError, KeyError, TypeError) as exc:
        error(f"--update: {out} is not this benchmark's output ({type(exc).__name__}: {exc})")
    if used != settings:
        error(f"--update: {out} was measured with other settings ({used}), not {settings}")
    return levels


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sample sizes (under 3 minutes)")
    parser.add_argument("--levels", type=int, nargs="+", default=sorted(LEVELS))
    parser.add_argument("--train-tasks", type=int)
    parser.add_argument("--heldout-tasks", type=int)
    parser.add_argument("--random-teams", type=int)
    parser.add_argument("--plan-limit", type=int)
    parser.add_argument("--jobs", type=int, default=2, help="levels measured at once")
    parser.add_argument("--out", default="runs/bench/orchestration_env.json")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the other levels an earlier run with the same settings wrote to --out",
    )
    args = parser.parse_args(argv)
    settings = dict(QUICK if args.quick else FULL)
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    bad = [lv for lv in args.levels if lv not in LEVELS]
    if bad:
        parser.error(f"--levels: unknown level(s) {bad} (known: {' '.join(map(str, sorted(LEVELS)))})")
    out = Path(args.out)
    recorded = {**settings, "quick": args.quick}  # what the output says it was measured with
    kept = kept_levels(out, recorded, parser.error) if args.update else {}
    from orchestrl.training.runtime import worker_pool

    started = time.perf_counter()
    load = os.getloadavg()
    with worker_pool(max(1, args.jobs), out.parent) as pool:
        futures = {lv: pool.submit(level_figures, lv, **settings) for lv in args.levels}
        levels = {str(lv): f.result() for lv, f in futures.items()}
    result = {
        "levels": dict(sorted({**kept, **levels}.items(), key=lambda kv: int(kv[0]))),
        "settings": recorded,
        "loadavg_start": [round(v, 2) for v in load],
        "loadavg_end": [round(v, 2) for v in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
    }
    text = json.dumps(result, indent=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    print(text)
    return result


if __name__ == "__main__":
    main()
