"""Sandbox throughput: full spec executions per core-second, and what the node cache saves on
single-edit counterfactual re-executions.

What it measures (one worker; the caller waits for each result, so one core's worth of work):

- ``uncached_executions_per_s``: level-2 reference specs (3 nodes: a join and two other stages)
  executed from scratch (node cache off) and scored against the target in full, divided by the CPU
  seconds of this process *and* the sandbox processes (``/proc``): executions per core-second.
  ``uncached_executions_per_s_wall`` is per wall-clock second (it drops when other jobs share
  the cores; the per-core figure drops less, but contention inflates CPU time too);
- ``cached_counterfactual_speedup``: every applicable single-node edit of each level-4 reference
  spec (revert duty, drop a dependency, downgrade capacity) re-executed once and scored, with the
  node cache warmed by the original spec (as after an episode) versus with it off; the ratio of
  executions per core-second. ``counterfactual_levels`` has level 2 too, and the share of nodes
  the cached runs re-ran (the edited node and its descendants must run again, so the ratio is
  bounded by the DAG's shape: about 1 / rerun share, less the fixed cost of scoring and IPC);
- ``uncached_executions_per_s_fresh_process``: the same, on a pool that runs every job in a fresh
  process (``trust_certified=False``), i.e. without the certificate that lets compiler output run
  in the warm worker (``sandbox/certify.py``); ``fresh_process_cost_ms`` is the CPU a fork costs
  per execution (the difference of the two rates' reciprocals); ``pool_stats.fresh_process``
  counts the jobs of the main pool that got one (0: every reference pipeline is certified);
- ``pool_rss_mb`` / ``pool_pss_mb``: resident memory of the zygote, the worker, its PID
  namespace's init and its supervisor (PSS splits the pages they share after the fork; RSS counts
  them once per process);
- ``processes_left_after_close``: processes of every pool the benchmark started (found by the
  workers' uids and PID namespaces and the pool's own pids) still alive after it closed: 0;
- ``cost_model``: per-row cost of the capacities on this machine (what ``ops.CAPACITY_COST``
  encodes); ``loadavg``: the machine's load while measuring.

Run::

    .venv/bin/python benchmarks/sandbox.py --quick    # shorter timing windows
    .venv/bin/python benchmarks/sandbox.py

It prints one JSON object. Expected: ``processes_left_after_close`` 0, and
``pool_stats.fresh_process`` 0 (every reference pipeline certified). Figures:
``benchmarks/RESULTS.md``, section "LEMON sandbox".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrl.envs.counterfactual import Edit
from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.edits import apply_edit
from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.reward import RewardConfig, Scorer
from orchestrl.envs.orchestration.sandbox.pool import SandboxLimits, SandboxPool
from orchestrl.envs.orchestration.spec import SpecError
from orchestrl.envs.orchestration.tables import TargetIndex
from orchestrl.envs.orchestration.tasks import LEVELS, Task, generate_task


def _cpu_seconds(pool: SandboxPool) -> float:
    """CPU time of this process plus every sandbox process (retired workers included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime + pool.cpu_seconds()


def _scorer(task: Task) -> Scorer:
    """Scores every execution in full (no memo of outputs seen before), as for new specs."""
    assert task.target is not None
    return Scorer(
        TargetIndex(task.target),
        task.reference_work,
        task.level.agents,
        RewardConfig(schedule=1.0),
        memoise=False,
    )


def _rate(pool: SandboxPool, run, seconds: float) -> tuple[float, float, int]:
    """(per core-second, per wall second, count) of ``run()`` calls (each returns #executions)."""
    count = 0
    wall0, cpu0 = time.perf_counter(), _cpu_seconds(pool)
    while time.perf_counter() - wall0 < seconds:
        count += run()
    wall, cpu = time.perf_counter() - wall0, _cpu_seconds(pool) - cpu0
    return count / max(cpu, 1e-9), count / max(wall, 1e-9), count


def uncached(pool: SandboxPool, tasks: list[Task], seconds: float) -> dict[str, float]:
    executor = Executor(pool, NodeCache())
    scorers = {id(t): _scorer(t) for t in tasks}
    for t in tasks:  # warm: sources and code reach the worker once
        assert executor.execute(t, t.reference, use_cache=False).ok

    def run() -> int:
        for t in tasks:
            scorers[id(t)].score(executor.execute(t, t.reference, use_cache=False))
        return len(tasks)

    per_core, per_wall, n = _rate(pool, run, seconds)
    return {
        "uncached_executions_per_s": per_core,
        "uncached_executions_per_s_wall": per_wall,
        "executions": n,
    }


def edited_specs(task: Task) -> list:
    """Every applicable, valid single-node edit of the reference spec."""
    spec = task.reference
    out = []
    for node in spec.nodes:
        edits = [Edit.base_duty(), Edit.downgrade_capacity()] + [
            Edit.drop_edge(i) for i in range(len(node.deps))
        ]
        for edit in edits:
            try:
                edited = apply_edit(spec, node.id, edit, lambda action: None)
            except SpecError:
                continue
            if edited is not None:
                out.append(edited)
    return out


def counterfactuals(tasks: list[Task], seconds: float) -> tuple[dict[str, float], int]:
    """Edited-spec re-executions per core-second, node cache on vs off (and how many processes of
    its pools were left after they closed).

    Each mode gets a fresh pool (so neither inherits the other's compiled code) and fresh
    executors that already ran each original spec (as after an episode); every edited spec is
    then executed and scored once, the first time it is seen, as a learner would."""
    work = [(t, edited_specs(t)) for t in tasks]
    rates = {}
    left = 0
    for mode in ("uncached", "cached"):
        with SandboxPool(workers=1) as pool:
            executors = []
            for task, _ in work:
                executor = Executor(pool, NodeCache())
                executor.execute(task, task.reference)
                executors.append(executor)
            scorers = [_scorer(t) for t, _ in work]
            count, spent, ran, nodes = 0, 0.0, 0, 0
            started = time.perf_counter()
            while count == 0 or time.perf_counter() - started < seconds:
                cpu0 = _cpu_seconds(pool)
                for executor, scorer, (task, specs) in zip(executors, scorers, work, strict=True):
                    for spec in specs:
                        execution = executor.execute(task, spec, use_cache=mode == "cached")
                        scorer.score(execution)
                        ran += sum(
                            1 for n in execution.nodes.values() if n.status != "skipped" and not n.cached
                        )
                        nodes += len(spec.nodes)
                        count += 1
                spent += _cpu_seconds(pool) - cpu0
                executors = [Executor(pool, NodeCache()) for _ in work]  # the next lap sees them anew
                for executor, (task, _) in zip(executors, work, strict=True):
                    executor.execute(task, task.reference)
                scorers = [_scorer(t) for t, _ in work]
            rates[mode] = (count / spent, ran / nodes)
        left += len(pool.processes())
    return {
        "cached_per_s": rates["cached"][0],
        "uncached_per_s": rates["uncached"][0],
        "speedup": rates["cached"][0] / rates["uncached"][0],
        "nodes_rerun_share": rates["cached"][1],
        "edits_per_task": float(np.mean([len(s) for _, s in work])),
    }, left


def cost_model(rows: int = 300, reps: int = 300) -> dict[str, float]:
    """Per-row cost of text normalisation and number parsing relative to a plain filter."""
    rng = np.random.default_rng(0)
    text = pd.Series(pd.array(rng.choice([" Acme  corp", "globex ", "INITECH"], rows), dtype="str"))
    money = pd.Series(pd.array(rng.choice(["$1,200.50", "12.5", "7"], rows), dtype="str"))
    frame = pd.DataFrame({"t": text, "v": rng.random(rows)})

    def clock(fn) -> float:
        start = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - start) / reps

    base = clock(lambda: ops.op_filter(frame, "v", "gt", 0.5, "small"))
    return {
        "filter_us_per_row": base / rows * 1e6,
        "medium_text_vs_filter": clock(lambda: ops.as_text(text, "medium")) / base,
        "large_numbers_vs_filter": clock(lambda: ops.as_numbers(money, "large")) / base,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer tasks, shorter timing windows (< 1 min)")
    args = parser.parse_args()
    n_tasks, seconds = (12, 4.0) if args.quick else (40, 12.0)
    started = time.perf_counter()
    level2 = [generate_task(2, "train", s) for s in range(n_tasks)]
    left = 0
    with SandboxPool(workers=1) as pool:
        result: dict[str, object] = {"quick": args.quick, "capabilities": pool.capabilities}
        result.update(uncached(pool, level2, seconds))
        memory = pool.memory_mb()
        result["pool_rss_mb"] = memory["rss_mb"]
        result["pool_pss_mb"] = memory["pss_mb"]
        result["pool_stats"] = {**pool.stats, "fatal_kinds": dict(pool.fatal_kinds)}
    left += len(pool.processes())
    with SandboxPool(workers=1, limits=SandboxLimits(trust_certified=False)) as pool:
        fresh = uncached(pool, level2, seconds / 2)
        result["uncached_executions_per_s_fresh_process"] = fresh["uncached_executions_per_s"]
        result["fresh_process_jobs_share"] = pool.stats["fresh_process"] / max(pool.stats["jobs"], 1)
    left += len(pool.processes())
    result["fresh_process_cost_ms"] = 1e3 * (
        1 / fresh["uncached_executions_per_s"] - 1 / float(result["uncached_executions_per_s"])  # type: ignore[arg-type]
    )
    per_level = {}
    for level in (2, 4):
        tasks = level2 if level == 2 else [generate_task(level, "train", s) for s in range(n_tasks // 2)]
        per_level[f"level_{level}"], pool_left = counterfactuals(tasks, seconds / 2)
        left += pool_left
    result["processes_left_after_close"] = left
    result["counterfactual_levels"] = per_level
    result["cached_counterfactual_speedup"] = per_level["level_4"]["speedup"]
    result["cost_model"] = cost_model()
    result["levels_agents"] = {str(k): v.agents for k, v in LEVELS.items()}
    result["loadavg"] = list(os.getloadavg())
    result["seconds"] = time.perf_counter() - started
    print(json.dumps(result, indent=1, default=float))


if __name__ == "__main__":
    main()
