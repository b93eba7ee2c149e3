"""Training throughput of ippo and mappo against plain RLlib PPO, and of mappo on the batched MPE,
measured in one run.

What it measures, on MPE simple_spread (N=3, 25-step episodes):
- ``raw_env_steps_per_s``: the PettingZoo env alone, random actions, one core;
- whole-iteration env steps/s (sampling + learning) for plain RLlib PPO (its default module, one
  shared policy), ippo and mappo, with the same runner settings, at 1 and 2 env runners with
  vectorised sub-envs; the best setting of each is reported, with ``mappo_vs_plain_ppo``;
- ``vector_python_vs_single``: mappo with ``--envs-per-runner`` Python sub-envs on one runner
  against one sub-env (RLlib's own vectorisation, any registered env);
- ``batched_mappo_env_steps_per_s``: mappo on ``simple_spread_batched`` (the same maths as torch
  tensors over ``BATCHED["envs_per_env_runner"]`` copies, sampled in bulk by
  ``BatchedEnvRunner`` on the driver; its PPO settings are in ``BATCHED``), with
  ``batched_vs_plain_ppo``; ``batched_raw_env_steps_per_s`` is that env alone (random actions,
  all copies), and ``batched_rllib_stepping_env_steps_per_s`` the same run with RLlib's own
  per-copy sampling loop, which says what that loop costs;
- ``peak_rss_mb``: peak resident memory of the driver and all Ray worker processes together;
- ``load_avg_1_5_15_before`` / ``_after``: the machine's load averages around the run.

Run:
    python benchmarks/throughput.py
    python benchmarks/throughput.py --quick    # fewer timed iterations

Expected: ``ippo_vs_plain_ppo`` and ``mappo_vs_plain_ppo`` say what ippo's and mappo's own
modules and connectors cost over RLlib's default module on the same runners;
``batched_vs_plain_ppo`` what the batched env and bulk sampling gain over plain PPO on mpe2.
Figures: ``benchmarks/RESULTS.md``, section "Training throughput".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import torch

from orchestrl.envs.registry import make_env
from orchestrl.experiment.builder import base_ppo_config, build_ppo_config
from orchestrl.experiment.config import ResourcesSection, validate_config
from orchestrl.training.checkpoints import build_algorithm
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

ENV_KWARGS = {"N": 3, "max_cycles": 25}
BATCHED = {
    "env_runners": 0,
    "envs_per_env_runner": 256,
    "train_batch_size": 256 * 50,
    "minibatch_size": 256 * 50,
    "num_epochs": 2,
}
"""Batched mappo: every copy on the driver's one runner (no remote runners to ship episodes from),
two episodes per copy per iteration, and two epochs of two minibatches (rows are agent steps, 3 per
env step): the learner's passes cost as much per step as sampling, so they are kept few and large."""


def batched_raw_env_steps_per_s(seconds: float) -> float:
    from orchestrl.envs.batched.mpe_env import simple_spread_vector

    env = simple_spread_vector(num_envs=BATCHED["envs_per_env_runner"], **ENV_KWARGS)
    env.reset_tensors(seed=0)
    gen = torch.Generator().manual_seed(0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        actions = {a: torch.randint(5, (env.num_envs,), generator=gen) for a in env.possible_agents}
        env.step_tensors(actions)
        steps += env.num_envs
    return steps / (time.perf_counter() - start)


def raw_env_steps_per_s(seconds: float) -> float:
    env = make_env("simple_spread", **ENV_KWARGS)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        if not env.agents:
            env.reset()
        actions = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
        env.step(actions)
        steps += 1
    env.close()
    return steps / (time.perf_counter() - start)


def batched_experiment(run_dir: Path) -> dict:
    res = {k: BATCHED[k] for k in ("env_runners", "envs_per_env_runner")}
    training = {k: BATCHED[k] for k in ("train_batch_size", "minibatch_size", "num_epochs")}
    return {
        "name": "bench_batched_mappo",
        "seed": 0,
        "run_dir": str(run_dir),
        "env": {"name": "simple_spread_batched", "kwargs": ENV_KWARGS},
        "algorithm": {"name": "mappo"},
        "resources": res,
        "training": training,
    }


def experiment(algo: str, runners: int, envs_per_runner: int, run_dir: Path) -> dict:
    return {
        "name": f"bench_{algo}",
        "seed": 0,
        "run_dir": str(run_dir),
        "env": {"name": "simple_spread", "kwargs": ENV_KWARGS},
        # plain PPO is built from the same experiment (env, runners, PPO knobs), then given
        # RLlib's default module instead of ours; see plain_ppo_config.
        "algorithm": {"name": "ippo" if algo == "plain_ppo" else algo},
        "resources": {
            "env_runners": runners,
            "envs_per_env_runner": envs_per_runner,
            "cpus_per_env_runner": 1,
        },
        "training": {"train_batch_size": 4000, "minibatch_size": 500, "num_epochs": 5},
    }


def plain_ppo_config(cfg):
    """RLlib's own PPO module (DefaultPPOTorchRLModule) on one shared policy, same everything else."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    return (
        base_ppo_config(cfg)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(
            rl_module_spec=RLModuleSpec(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"})
        )
    )


def train_throughput(algo: str, runners: int, envs: int, iters: int, run_dir: Path) -> float:
    if algo.startswith("batched"):
        cfg = validate_config(batched_experiment(run_dir))
        ppo = build_ppo_config(cfg)
        if algo == "batched_rllib_stepping":
            ppo = ppo.environment(env_config={**ppo.env_config, "rllib_stepping": True})
    else:
        cfg = validate_config(experiment(algo, runners, envs, run_dir))
        ppo = plain_ppo_config(cfg) if algo == "plain_ppo" else build_ppo_config(cfg)
    return timed_iterations(ppo, iters, run_dir / "bench" / f"{algo}_{runners}x{envs}")


def timed_iterations(ppo, iters: int, storage: Path) -> float:
    algorithm = build_algorithm(ppo, storage)
    try:
        algorithm.train()  # warm-up: actor start-up, first weight sync
        rates = []
        for _ in range(iters):
            before = time.perf_counter()
            result = algorithm.train()
            elapsed = time.perf_counter() - before
            rates.append(float(result["env_runners"]["num_env_steps_sampled"]) / elapsed)
    finally:
        algorithm.stop()
    return statistics.median(rates)


class PeakMemory:
    """Samples the summed RSS of this process and every Ray worker process."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            total = 0
            for proc in psutil.process_iter(["pid", "cmdline", "memory_info"]):
                cmd = " ".join(proc.info["cmdline"] or [])
                if proc.info["pid"] == me or "ray::" in cmd or "default_worker.py" in cmd:
                    total += proc.info["memory_info"].rss if proc.info["memory_info"] else 0
            self.peak = max(self.peak, total / 2**20)
            self._stop.wait(0.5)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer timed iterations (under 3 minutes)")
    parser.add_argument("--envs-per-runner", type=int, default=4)
    parser.add_argument(
        "--batched-only", action="store_true", help="only the batched env's figures (no ratio to plain PPO)"
    )
    args = parser.parse_args()
    iters = 2 if args.quick else 5

    run_dir = Path(tempfile.mkdtemp(prefix="orl-bench-"))
    quiet_environment(run_dir)
    silence_noise(verbose=False)
    out: dict = {"env": "simple_spread", "env_kwargs": ENV_KWARGS, "timed_iterations": iters}
    load_before = list(os.getloadavg())
    seconds = 3.0 if args.quick else 10.0
    if not args.batched_only:
        out["raw_env_steps_per_s"] = round(raw_env_steps_per_s(seconds), 1)
    out["batched_raw_env_steps_per_s"] = round(batched_raw_env_steps_per_s(seconds), 1)
    out["batched_settings"] = BATCHED
    out["torch_threads"] = torch.get_num_threads()
    settings: dict[str, dict[str, float]] = {}

    def measure(algo: str, runners: int, envs: int) -> None:
        rate = train_throughput(algo, runners, envs, iters, run_dir)
        key = f"{runners}x{envs}"
        settings.setdefault(algo, {})[key] = round(rate, 1)
        print(f"{algo:<22} runners x envs = {key}: {rate:8.1f} env steps/s", file=sys.stderr)

    batched = (BATCHED["env_runners"], BATCHED["envs_per_env_runner"])
    with PeakMemory() as memory, ray_session(ResourcesSection(object_store_mb=512), run_dir):
        measure("batched_mappo", *batched)
        measure("batched_rllib_stepping", *batched)
        if not args.batched_only:
            for runners in (1, 2):
                for algo in ("plain_ppo", "ippo", "mappo"):
                    measure(algo, runners, args.envs_per_runner)
            measure("mappo", 1, 1)
    for algo, by_setting in settings.items():
        out[f"{algo}_env_steps_per_s"] = max(by_setting.values())
    out["by_setting"] = settings
    if not args.batched_only:
        plain = out["plain_ppo_env_steps_per_s"]
        out["mappo_vs_plain_ppo"] = round(out["mappo_env_steps_per_s"] / plain, 3)
        out["ippo_vs_plain_ppo"] = round(out["ippo_env_steps_per_s"] / plain, 3)
        out["batched_vs_plain_ppo"] = round(out["batched_mappo_env_steps_per_s"] / plain, 3)
        mappo = settings["mappo"]
        out["vector_python_vs_single"] = round(mappo[f"1x{args.envs_per_runner}"] / mappo["1x1"], 3)
    out["peak_rss_mb"] = round(memory.peak, 1)
    out["load_avg_1_5_15_before"] = load_before
    out["load_avg_1_5_15_after"] = list(os.getloadavg())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
