"""Serving throughput: ``orchestrl serve``'s ``POST /act`` on a local Ray Serve, 8 clients at once.

What it measures: a team is deployed as ``orchestrl serve`` deploys it (one replica, Serve's HTTP
proxy on 127.0.0.1), then ``--clients`` threads each hold one keep-alive HTTP connection and send
``POST /act`` requests back to back, each a joint observation of the env (64 distinct ones, taken
from the env), until ``--requests`` answers came back. It prints one JSON object:

- ``requests_per_s``: answered requests / wall seconds of the measured phase;
- ``latency_ms``: p50, p99 and mean of each request's round trip as its client saw it;
- ``errors``: requests that did not come back 200 (the first 64 answers are also checked against
  the policy acting in this process: ``checked``, ``mismatches``);
- ``client_cpu_s``: CPU seconds of this process (the clients) during the measured phase, next to
  ``wall_s``; ``loadavg``: the machine's load before and after (other jobs share the cores).

The team: ``--checkpoint RUN_ID_OR_CHECKPOINT``, or by default an untrained MAPPO team of
``configs/mappo_simple_spread.yaml`` (3 agents, one shared 64x64 actor, 18 observations each): the
weights' values do not change the cost of a forward pass.

Run::

    .venv/bin/python benchmarks/serve.py --quick     # 400 requests
    .venv/bin/python benchmarks/serve.py             # 4000 requests
    .venv/bin/python benchmarks/serve.py --checkpoint <RUN_ID>

Expected: 0 errors and 0 mismatches. Loopback only; Ray, Serve and their files are stopped and
removed at the end. Figures: ``benchmarks/RESULTS.md``, section "Serving".
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import ServedTeam
from orchestrl.deploy.team import find_team
from orchestrl.envs.registry import get_env
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import ResourcesSection, load_config
from orchestrl.experiment.policy import TrainedPolicy, to_json
from orchestrl.training.inprocess import InProcessTrainer
from orchestrl.training.runtime import quiet_environment, ray_session, silence_noise

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "mappo_simple_spread.yaml"


def default_team(folder: Path) -> tuple[TrainedPolicy, Any, str]:
    """An untrained team of ``configs/mappo_simple_spread.yaml`` loaded back from a checkpoint folder."""
    cfg = load_config(DEFAULT_CONFIG, ["resources.env_runners=0", "resources.envs_per_env_runner=1"])
    ppo = build_ppo_config(cfg)
    trainer = InProcessTrainer(ppo)
    try:
        trainer.learner.module.save_to_path(str(folder / "rl_module"))
    finally:
        trainer.stop()
    return TrainedPolicy.from_checkpoint(folder, ppo), ppo, f"untrained {cfg.name} (64x64 actor)"


def joint_observations(ppo: Any, n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` joint observations from resets and random steps of the team's env, as JSON."""
    env = ppo.env(ppo.env_config)
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    try:
        obs, _ = env.reset(seed=seed)
        while len(out) < n:
            out.append({a: np.asarray(o).tolist() for a, o in obs.items()})
            actions = {a: env.action_space[a].sample() for a in obs}
            obs, _, terminated, truncated, _ = env.step(actions)
            if terminated.get("__all__") or truncated.get("__all__"):
                obs, _ = env.reset(seed=int(rng.integers(1 << 30)))
    finally:
        env.close()
    return out


def post(conn: http.client.HTTPConnection, body: bytes) -> tuple[int, bytes]:
    conn.request("POST", "/act", body=body, headers={"content-type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def load(
    port: int, bodies: list[bytes], clients: int, requests: int
) -> tuple[list[float], int, float, float]:
    """``requests`` POSTs from ``clients`` threads; returns latencies (ms), errors, wall and CPU s."""
    latencies: list[float] = []
    errors = 0
    counter = iter(range(requests))
    lock = threading.Lock()

    def client() -> None:
        nonlocal errors
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine: list[float] = []
        bad = 0
        try:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    break
                started = time.perf_counter()
                status, _ = post(conn, bodies[i % len(bodies)])
                mine.append((time.perf_counter() - started) * 1000)
                bad += status != 200
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)
                errors += bad

    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return latencies, errors, wall, cpu


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint", help="A run id or checkpoint folder (default: an untrained MAPPO team)."
    )
    parser.add_argument("--run-dir", default="runs", help="Tracking store of --checkpoint's run id.")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--quick", action="store_true", help="400 requests")
    args = parser.parse_args()
    requests = 400 if args.quick else args.requests

    scratch = Path(tempfile.mkdtemp(prefix="orl-serve-bench-"))
    quiet_environment(scratch)
    silence_noise(verbose=False)
    try:
        if args.checkpoint:
            team = find_team(args.checkpoint, run_dir=args.run_dir)
            ppo = team.rllib_config("train")
            policy, what = team.policy(ppo), f"{team.config.name} ({team.checkpoint})"
            family = get_env(team.config.env.name).family
        else:
            policy, ppo, what = default_team(scratch / "team")
            family = "mpe"
        observations = joint_observations(ppo, 64)
        expected = [to_json(policy.act(policy.observations(o))) for o in observations]
        bodies = [json.dumps({"observations": o}).encode() for o in observations]
        loadavg_before = os.getloadavg()
        port = free_port()
        with ray_session(ResourcesSection(object_store_mb=128), scratch):
            serve.start(ServedTeam(policy, what, family), port=port)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                answers = [json.loads(post(conn, body)[1]).get("actions") for body in bodies]  # warm-up
                conn.close()
                mismatches = sum(a != e for a, e in zip(answers, expected, strict=True))
                latencies, errors, wall, cpu = load(port, bodies, args.clients, requests)
            finally:
                serve.stop(keep_serve=True)  # the local Ray ends right after
        result = {
            "endpoint": "POST /act",
            "team": what,
            "agents": len(policy.agents),
            "replicas": 1,
            "clients": args.clients,
            "requests": len(latencies),
            "errors": errors,
            "checked": len(expected),
            "mismatches": mismatches,
            "requests_per_s": round(len(latencies) / wall, 1),
            "latency_ms": {
                "p50": round(float(np.percentile(latencies, 50)), 2),
                "p99": round(float(np.percentile(latencies, 99)), 2),
                "mean": round(float(np.mean(latencies)), 2),
            },
            "wall_s": round(wall, 2),
            "client_cpu_s": round(cpu, 2),
            "loadavg": {
                "before": [round(x, 2) for x in loadavg_before],
                "after": [round(x, 2) for x in os.getloadavg()],
            },
        }
        print(json.dumps(result, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
