"""How many seconds of training mappo needs on simple_spread before its greedy policy scores -60.

What it runs: ``configs/mappo_simple_spread.yaml`` (mappo on ``simple_spread_batched``: N=3,
25-step episodes, 128 copies on the driver's env runner) for 5 seeds, each for a fixed budget of
training wall time, through Ray like ``orchestrl train``. After every training iteration the
greedy policy (no exploration) plays ``EVAL_EPISODES`` episodes of the same env; that evaluation,
building the algorithm and starting Ray are timed apart and not counted as training time.

Printed: ONE JSON object:

- ``seconds_to_minus_60``: IQM over seeds of the training seconds until the greedy team return
  (summed over the 3 agents) first reaches -60, with its 95% stratified-bootstrap CI
  (``orchestrl.tracking.stats``); a seed that never reaches it counts as the budget (a lower
  bound; ``never_reached`` lists them);
- ``return_at_seconds``: the greedy return at fixed training-time budgets (the last evaluation
  within each), IQM and CI over seeds; ``env_steps_per_s``: training env steps per training second;
- ``ray_start_s``, ``build_s`` (IQM over seeds), ``eval_s_per_evaluation``, ``settings``, ``meta``;
- ``peer``: the same figures (and every seed's curve) for BenchMARL's MAPPO on PettingZoo's
  simple_spread, trained after mappo on the same seeds for the same training time by
  ``benchmarks/peers/benchmarl_spread.py`` under ``--peer-python`` (default ``.venv-peers``, which
  ``make peers`` builds: BenchMARL's torch and PettingZoo conflict with orchestrl's); without that
  environment, ``{"skipped": why}``; ``env_steps_per_s_vs_peer``: mappo's throughput over its.

Each finished run is one line (``RUN_LINE``, ``PEER_LINE`` for BenchMARL's) on stderr and, with
``--log``, appended to that file; ``--summarise LOG...`` rebuilds the report from such lines
without training (several invocations can each run some seeds: ``--first-seed``, ``--seeds``;
``--peer-only`` runs only BenchMARL's, ``--no-peer`` only mappo's).

Run:
    python benchmarks/spread_wallclock.py --quick      # 2 seeds, 20 s of training each
    python benchmarks/spread_wallclock.py --log benchmarks/logs/spread_wallclock.log
    python benchmarks/spread_wallclock.py --summarise benchmarks/logs/spread_wallclock.log

Expected: the JSON above; figures in ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import load_config, parse_overrides
from orchestrl.tracking.stats import aggregate
from orchestrl.training.checkpoints import build_algorithm
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "mappo_simple_spread.yaml"
THRESHOLD = -60.0
SEEDS = 5
BUDGET_S = 60.0
QUICK_SEEDS, QUICK_BUDGET_S = 2, 20.0
CHECKPOINTS_S = (10.0, 20.0, 30.0, 60.0)
EVAL_EPISODES = 64
RUN_LINE = "spread-wallclock-run"
PEER_LINE = "spread-wallclock-peer"
ROOT = Path(__file__).resolve().parent.parent
PEER_SCRIPT = ROOT / "benchmarks" / "peers" / "benchmarl_spread.py"
PEER_PYTHON = ROOT / ".venv-peers" / "bin" / "python"


def one_run(seed: int, budget_s: float, run_dir: Path, sets: dict[str, Any] | None = None) -> dict[str, Any]:
    """Trains one seed for ``budget_s`` seconds of ``train()``; greedy evaluation after each iteration.

    ``sets``: dotted config overrides (``--set``) applied before the seed and evaluation ones.
    """
    overrides = {**(sets or {}), "seed": seed, "run_dir": str(run_dir), "evaluation.episodes": EVAL_EPISODES}
    load_before = os.getloadavg()[0]
    cfg = load_config(CONFIG, overrides)
    started = time.perf_counter()
    algo = build_algorithm(build_ppo_config(cfg), run_dir / f"seed_{seed}")
    build_s = time.perf_counter() - started
    curve: list[list[float]] = []  # [training seconds, env steps, greedy return]
    train_s, steps, eval_s = 0.0, 0, 0.0
    try:
        while train_s < budget_s:
            before = time.perf_counter()
            result = algo.train()
            train_s += time.perf_counter() - before
            steps += int(result["env_runners"]["num_env_steps_sampled"])
            before = time.perf_counter()
            greedy = algo.evaluate()
            eval_s += time.perf_counter() - before
            ret = float(greedy["env_runners"]["episode_return_mean"])
            curve.append([round(train_s, 3), steps, round(ret, 3)])
    finally:
        algo.stop()
    return {
        "load_avg_1_before": round(load_before, 2),
        "build_s": round(build_s, 3),
        "eval_s": round(eval_s, 3),
        "evaluations": len(curve),
        "curve": curve,
    }


def seconds_to(curve: list[list[float]], threshold: float) -> float | None:
    """Training seconds at the first evaluation at or above ``threshold`` (None: never)."""
    return next((t for t, _, r in curve if r >= threshold), None)


def return_at(curve: list[list[float]], seconds: float) -> float | None:
    """The greedy return of the last evaluation within ``seconds`` of training (None: none yet)."""
    within = [r for t, _, r in curve if t <= seconds]
    return within[-1] if within else None


def estimate(values: list[float]) -> dict[str, Any]:
    agg = aggregate(np.asarray(values, dtype=float)[:, None])
    return {"iqm": round(agg.iqm.value, 3), "ci95": [round(agg.iqm.low, 3), round(agg.iqm.high, 3)]}


def curve_stats(runs: dict[int, dict[str, Any]], budget_s: float) -> dict[str, Any]:
    """Time to the threshold, returns at the fixed budgets and throughput of runs' curves."""
    times = {seed: seconds_to(run["curve"], THRESHOLD) for seed, run in runs.items()}
    out: dict[str, Any] = {
        "seconds_to_minus_60": estimate([budget_s if t is None else t for t in times.values()]),
        "per_seed_seconds_to_minus_60": {str(s): t for s, t in times.items()},
        "never_reached": [s for s, t in times.items() if t is None],
        "return_at_seconds": {},
        "env_steps_per_s": estimate([r["curve"][-1][1] / r["curve"][-1][0] for r in runs.values()]),
        "build_s": estimate([r["build_s"] for r in runs.values()]),
        "eval_s_per_evaluation": round(
            sum(r["eval_s"] for r in runs.values()) / max(1, sum(r["evaluations"] for r in runs.values())), 3
        ),
    }
    for mark in CHECKPOINTS_S:
        if mark > budget_s:
            continue
        values = [return_at(r["curve"], mark) for r in runs.values()]
        if all(v is not None for v in values):
            out["return_at_seconds"][str(int(mark))] = estimate(values)
    out["final_return"] = estimate([r["curve"][-1][2] for r in runs.values()])
    out["seeds"] = sorted(runs)
    out["budget_s"] = budget_s
    return out


def peer_stats(peer: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """``curve_stats`` of BenchMARL's runs, with their settings and every seed's curve."""
    return {
        **curve_stats(peer, max(r["budget_s"] for r in peer.values())),
        "settings": next(iter(peer.values()))["settings"],
        "curves": {str(s): r["curve"] for s, r in sorted(peer.items())},
    }


def report(
    runs: dict[int, dict[str, Any]],
    budget_s: float,
    meta: dict[str, Any],
    sets: dict[str, Any] | None = None,
    peer: dict[int, dict[str, Any]] | str | None = None,
) -> dict[str, Any]:
    """The report; ``peer``: BenchMARL's runs by seed, or why there are none."""
    out = curve_stats(runs, budget_s)
    out["settings"] = {
        "config": str(CONFIG.relative_to(CONFIG.parent.parent)),
        "eval_episodes": EVAL_EPISODES,
        "overrides": sets or {},
    }
    if isinstance(peer, dict) and peer:
        out["peer"] = peer_stats(peer)
        mine = out["env_steps_per_s"]["iqm"]
        out["env_steps_per_s_vs_peer"] = round(mine / max(out["peer"]["env_steps_per_s"]["iqm"], 1e-9), 2)
    elif peer is not None:
        out["peer"] = {"skipped": peer if isinstance(peer, str) else "no peer runs"}
    out["meta"] = meta
    return out


def read_runs(logs: list[Path]) -> tuple[dict[int, dict[str, Any]], float, dict[str, Any]]:
    """The runs (by seed), the largest budget and the ``--set`` overrides of the lines in ``logs``.

    Lines of different overrides cannot be summarised together (SystemExit).
    """
    runs: dict[int, dict[str, Any]] = {}
    budget = 0.0
    sets: dict[str, Any] | None = None
    for log in logs:
        for line in log.read_text().splitlines():
            if line.startswith(RUN_LINE + " "):
                seed, budget_s, run, *rest = json.loads(line[len(RUN_LINE) + 1 :])
                line_sets = rest[0] if rest else {}
                if sets is not None and line_sets != sets:
                    raise SystemExit(
                        f"--summarise: runs with different --set overrides: {sets} and {line_sets}"
                    )
                sets = line_sets
                runs[int(seed)] = run
                budget = max(budget, float(budget_s))
    if not runs:
        raise SystemExit(f"--summarise: no '{RUN_LINE}' lines in {', '.join(map(str, logs))}")
    return dict(sorted(runs.items())), budget, sets or {}


def read_peer_runs(logs: list[Path]) -> dict[int, dict[str, Any]]:
    """BenchMARL's runs (by seed) in ``logs``: their ``PEER_LINE`` lines."""
    runs: dict[int, dict[str, Any]] = {}
    for log in logs:
        for line in log.read_text().splitlines():
            if line.startswith(PEER_LINE + " "):
                run = json.loads(line[len(PEER_LINE) + 1 :])
                runs[int(run["seed"])] = run
    return dict(sorted(runs.items()))


def peer_missing(python: Path) -> str | None:
    """Why the peer cannot run with ``python`` (None: it can)."""
    if not python.is_file():
        return f"no BenchMARL environment: {python} does not exist (make peers creates it)"
    probe = subprocess.run([str(python), "-c", "import benchmarl"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
        return f"{python} cannot import benchmarl: {last}"
    return None


def run_peer(python: Path, seeds: list[int], budget_s: float, log: Path | None) -> dict[int, dict[str, Any]]:
    """Runs BenchMARL's MAPPO (``benchmarks/peers/benchmarl_spread.py``) seed by seed; logs each line."""
    runs: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        cmd = [str(python), str(PEER_SCRIPT), "--seeds", str(seed), "--budget-s", str(budget_s)]
        cmd += ["--eval-episodes", str(EVAL_EPISODES)]
        done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if done.returncode != 0:
            raise SystemExit(f"the BenchMARL peer failed on seed {seed}: {done.stderr.strip()[-2000:]}")
        run = json.loads(done.stdout.strip().splitlines()[-1])
        runs[seed] = run
        line = f"{PEER_LINE} {json.dumps(run)}"
        print(line, file=sys.stderr, flush=True)
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as f:
                f.write(line + "\n")
    return runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_SEEDS} seeds, {QUICK_BUDGET_S:.0f} s each"
    )
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=None, help="training seconds per seed")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override the config (repeatable), e.g. --set training.lr=3e-3",
    )
    parser.add_argument("--log", type=Path, default=None, help="append each finished run's line here")
    parser.add_argument(
        "--summarise", type=Path, nargs="+", default=None, help="report from logs, no training"
    )
    parser.add_argument(
        "--peer-python",
        type=Path,
        default=PEER_PYTHON,
        help="a Python with BenchMARL (make peers); its MAPPO trains the same seeds for the same time",
    )
    parser.add_argument("--no-peer", action="store_true", help="skip the BenchMARL peer")
    parser.add_argument("--peer-only", action="store_true", help="run only the BenchMARL peer")
    args = parser.parse_args(argv)
    if args.summarise:
        runs, budget, sets = read_runs(args.summarise)
        peer = read_peer_runs(args.summarise) or "no BenchMARL runs in the logs"
        result = report(runs, budget, {"summarised_from": [str(p) for p in args.summarise]}, sets, peer)
        print(json.dumps(result, indent=2))
        return result
    seeds = args.seeds or (QUICK_SEEDS if args.quick else SEEDS)
    budget = args.budget_s or (QUICK_BUDGET_S if args.quick else BUDGET_S)
    seed_list = list(range(args.first_seed, args.first_seed + seeds))
    peer_why = "--no-peer" if args.no_peer else peer_missing(args.peer_python)
    if args.peer_only:
        if peer_why:
            raise SystemExit(f"--peer-only: {peer_why}")
        peer_runs = run_peer(args.peer_python, seed_list, budget, args.log and args.log.resolve())
        result = {"peer": peer_stats(peer_runs)}
        print(json.dumps(result, indent=2))
        return result
    run_dir = Path(tempfile.mkdtemp(prefix="orl-spread-"))
    quiet_environment(run_dir)
    silence_noise(verbose=False)
    if args.log is not None:
        args.log = args.log.resolve()  # Ray's algorithm changes the working directory
    sets = parse_overrides(args.sets)
    cfg = load_config(CONFIG, sets)
    load_before = os.getloadavg()
    runs: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()
    with ray_session(cfg.resources, run_dir):
        ray_start_s = time.perf_counter() - started
        for seed in seed_list:
            runs[seed] = one_run(seed, budget, run_dir, sets)
            line = f"{RUN_LINE} {json.dumps([seed, budget, runs[seed], sets])}"
            print(line, file=sys.stderr, flush=True)
            if args.log is not None:
                args.log.parent.mkdir(parents=True, exist_ok=True)
                with args.log.open("a") as f:
                    f.write(line + "\n")
    meta = {
        "command": " ".join(["python", "benchmarks/spread_wallclock.py", *(argv or sys.argv[1:])]),
        "ray_start_s": round(ray_start_s, 3),
        "wall_s": round(time.perf_counter() - started, 1),
        "load_avg_1_5_15_before": list(load_before),
        "load_avg_1_5_15_after": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    peer = peer_why or run_peer(args.peer_python, seed_list, budget, args.log)
    meta["wall_s"] = round(time.perf_counter() - started, 1)
    result = report(runs, budget, meta, sets, peer)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
