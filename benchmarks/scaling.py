"""Env steps/s against the number of env runners, on a Ray cluster of several nodes on this machine.

What it measures, for mappo (one shared policy) on MPE simple_spread (N=3, 25-step episodes),
4 sub-envs per runner, 4,000 env steps per training iteration, 5 epochs of 500-row minibatches,
with 1, 2 and 4 env runners:

- ``env_steps_per_s_by_runners``: whole-iteration throughput of ``algorithm.train()`` (sample,
  learn, sync weights), median over the timed iterations;
- ``sampling_[cpu_]s_per_1k_env_steps_by_runners``: wall and CPU seconds one runner needs to
  sample 1,000 env steps, timed inside each runner while all runners of the setting sample at once.
  CPU seconds are what a runner costs on a core of its own; wall seconds add the waits for a core;
- ``learner_[cpu_]s_per_batch_by_runners``: one learner update on a 4,000-step batch, on the
  driver (``num_learners=0``), wall and CPU seconds;
- the medians of the CPU costs over the settings (``per_runner_sampling_cpu_s_per_1k_env_steps``,
  ``learner_cpu_s_per_batch``), which ``cluster/README.md`` turns into a projection for a real
  cluster, and the machine's load average at start and end.

Every timed iteration is followed at once by the component timings, so a round's figures share
the machine's load of that moment.

The cluster is the one the cluster tests start (``tests/helpers/multinode.py``, which starts and
stops only its own processes): a head with 0 CPUs, where the driver and the learner run, as on the
cluster YAMLs' head, and 4 worker nodes with 1 logical CPU each. Each runner asks for 1 CPU, so
each gets a node of its own. Logical CPUs are bookkeeping: all nodes share this machine's cores,
so on a 2-core machine 2 runners already compete with the driver and 4 runners oversubscribe it;
those figures show contention, not what separate machines would give.

Run:
    python benchmarks/scaling.py
    python benchmarks/scaling.py --quick    # 1 timed iteration per setting

Prints one JSON object (progress goes to stderr). On a machine whose cores the nodes share, the
throughput moves a lot from run to run and need not grow beyond 1 runner (the learner takes a large
part of every iteration); the per-runner CPU cost is the steadier figure. No output of it is saved,
so ``benchmarks/RESULTS.md`` has none of its figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNNER_COUNTS = (1, 2, 4)
BATCH = 4000
ENV_KWARGS = {"N": 3, "max_cycles": 25}
PROBE_STEPS = 1000
"""Env steps each runner samples when its sampling cost is timed."""


def cluster_helpers() -> ModuleType:
    """``tests/helpers/multinode.py``, the local multi-node cluster the cluster tests use (it
    starts and stops only its own processes). Loaded by path: ``tests`` is not a package."""
    spec = importlib.util.spec_from_file_location("multinode", ROOT / "tests" / "helpers" / "multinode.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["multinode"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def experiment(runners: int, run_dir: Path) -> dict[str, Any]:
    return {
        "name": f"scaling_{runners}",
        "seed": 0,
        "run_dir": str(run_dir),
        "env": {"name": "simple_spread", "kwargs": ENV_KWARGS},
        "algorithm": {"name": "mappo"},
        "resources": {"env_runners": runners, "envs_per_env_runner": 4, "cpus_per_env_runner": 1},
        "training": {"train_batch_size": BATCH, "minibatch_size": 500, "num_epochs": 5},
    }


def timed_sample(runner: Any) -> tuple[float, float]:
    """Runs inside an env runner: wall and CPU seconds of this process to sample ``PROBE_STEPS`` env
    steps (only the times travel back, so no episode transfer is counted). CPU seconds are what
    the work costs on a core of its own; wall seconds also hold the waits for a busy core."""
    wall, cpu = time.perf_counter(), time.process_time()
    runner.sample(num_timesteps=PROBE_STEPS, explore=True)
    return time.perf_counter() - wall, time.process_time() - cpu


def drain_metrics(group: Any) -> None:
    """Empties the runners' metrics, so steps sampled outside ``train()`` (the timing probes) are not
    counted in the next iteration's result."""
    group.foreach_env_runner(lambda r: r.get_metrics(), local_env_runner=False)


def measure(runners: int, iters: int, run_dir: Path) -> dict[str, Any]:
    """Builds the algorithm with ``runners`` env runners on the connected cluster and times it."""
    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.checkpoints import build_algorithm

    cfg = validate_config(experiment(runners, run_dir))
    algo = build_algorithm(build_ppo_config(cfg, gpus_available=0), run_dir / f"algo_{runners}")
    try:
        group = algo.env_runner_group
        # Warm-up (first forward passes, first weight sync), then one batch for the learner timing.
        lifetime = algo.train()["num_env_steps_sampled_lifetime"]
        chunks = group.foreach_env_runner(
            lambda r: r.sample(num_timesteps=BATCH // runners, explore=True), local_env_runner=False
        )
        batch = [episode for chunk in chunks for episode in chunk]
        drain_metrics(group)
        rounds = []
        # Each round times one training iteration, then each component cost right after it, so
        # all figures of a round see the same load from whatever else runs on the machine.
        for _ in range(iters):
            start = time.perf_counter()
            result = algo.train()
            wall = time.perf_counter() - start
            steps = result["num_env_steps_sampled_lifetime"] - lifetime
            lifetime = result["num_env_steps_sampled_lifetime"]
            probes = group.foreach_env_runner(timed_sample, local_env_runner=False)
            drain_metrics(group)
            start, cpu = time.perf_counter(), time.process_time()
            algo.learner_group.update(
                episodes=batch,
                num_epochs=cfg.training.num_epochs,
                minibatch_size=cfg.training.minibatch_size,
                shuffle_batch_per_epoch=True,
            )
            learn_wall, learn_cpu = time.perf_counter() - start, time.process_time() - cpu
            sample_wall = statistics.mean(p[0] for p in probes)
            sample_cpu = statistics.mean(p[1] for p in probes)
            rounds.append((steps / wall, wall, steps, sample_wall, sample_cpu, learn_wall, learn_cpu))
    finally:
        algo.stop()

    def median(i: int) -> float:
        return statistics.median(r[i] for r in rounds)

    return {
        "env_steps_per_s": median(0),
        "iteration_s": median(1),
        "env_steps_per_iteration": median(2),
        "sampling_s_per_1k": median(3) * 1000 / PROBE_STEPS,
        "sampling_cpu_s_per_1k": median(4) * 1000 / PROBE_STEPS,
        "learner_s_per_batch": median(5),
        "learner_cpu_s_per_batch": median(6),
        "learner_batch_env_steps": sum(len(episode) for episode in batch),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 timed iteration per setting instead of 3")
    args = parser.parse_args()
    iters = 1 if args.quick else 3

    mn = cluster_helpers()
    root = mn.new_root("orl-scale-")
    cluster = mn.LocalCluster(root, head_cpus=0, object_store_mb=200)
    out: dict[str, Any] = {
        "env": "simple_spread",
        "env_kwargs": ENV_KWARGS,
        "algorithm": "mappo",
        "envs_per_env_runner": 4,
        "train_batch_size": BATCH,
        "timed_iterations": iters,
        "cluster": f"head (0 CPUs) + {max(RUNNER_COUNTS)} worker nodes x 1 logical CPU, one machine",
    }
    import ray
    import torch

    from orchestrl.training.runtime import quiet_environment, silence_noise

    load_start = round(os.getloadavg()[0], 2)
    quiet_environment(root / "runs")
    silence_noise(verbose=False)
    by_runners: dict[str, dict[str, Any]] = {}
    try:
        cluster.start()
        cluster.ensure_workers(max(RUNNER_COUNTS), num_cpus=1)
        print(f"cluster up: {len(cluster.alive_nodes())} nodes", file=sys.stderr)
        ray.init(address=cluster.gcs_address, log_to_driver=False, logging_level="ERROR")
        for runners in RUNNER_COUNTS:
            by_runners[str(runners)] = figures = measure(runners, iters, root / "runs")
            print(
                f"{runners} runner(s): {figures['env_steps_per_s']:7.1f} env steps/s, "
                f"{figures['sampling_s_per_1k']:.2f} s ({figures['sampling_cpu_s_per_1k']:.2f} CPU s) "
                f"per 1k steps per runner, learner {figures['learner_s_per_batch']:.2f} s "
                f"({figures['learner_cpu_s_per_batch']:.2f} CPU s) per batch",
                file=sys.stderr,
            )
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
        left = cluster.processes()
        mn.remove_tree(root)
    if left:
        raise SystemExit(f"cluster processes survived the benchmark: {sorted(p.pid for p in left)}")

    def by(key: str, digits: int) -> dict[str, float]:
        return {n: round(f[key], digits) for n, f in by_runners.items()}

    out["env_steps_per_s_by_runners"] = by("env_steps_per_s", 1)
    out["speedup_vs_1_runner"] = {
        n: round(f["env_steps_per_s"] / by_runners["1"]["env_steps_per_s"], 2) for n, f in by_runners.items()
    }
    out["iteration_s_by_runners"] = by("iteration_s", 3)
    out["env_steps_per_iteration"] = by("env_steps_per_iteration", 0)
    out["sampling_s_per_1k_env_steps_by_runners"] = by("sampling_s_per_1k", 3)
    out["sampling_cpu_s_per_1k_env_steps_by_runners"] = by("sampling_cpu_s_per_1k", 3)
    out["per_runner_sampling_cpu_s_per_1k_env_steps"] = round(
        statistics.median(f["sampling_cpu_s_per_1k"] for f in by_runners.values()), 3
    )
    out["learner_s_per_batch_by_runners"] = by("learner_s_per_batch", 3)
    out["learner_cpu_s_per_batch_by_runners"] = by("learner_cpu_s_per_batch", 3)
    out["learner_cpu_s_per_batch"] = round(
        statistics.median(f["learner_cpu_s_per_batch"] for f in by_runners.values()), 3
    )
    out["learner_torch_threads"] = torch.get_num_threads()
    out["learner_batch_env_steps"] = by_runners["1"]["learner_batch_env_steps"]
    out["load_avg_1min"] = {"start": load_start, "end": round(os.getloadavg()[0], 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
