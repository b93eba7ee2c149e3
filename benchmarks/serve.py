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

**Faults** (``--faults``): an untrained level-1 LEMON team (``configs/lemon_level1.yaml``, its
weights as initialised: an orchestration team answers both ``POST /act`` and ``POST /plan``, and
an untrained one makes ``/plan`` run the solver's search in the sandbox, its dearest path) is
served by 2 replicas on 127.0.0.1. ``--act-clients`` threads send ``/act`` at ``--rate`` requests/s
in all, one more thread sends ``/plan`` (a held-out level-1 task's tables) every ``--plan-every-s``.
After ``--before-s`` seconds one replica's process is killed (SIGKILL; its PID from Ray's state
API); the load goes on until both replicas run again (Serve's status) and ``--after-s`` more.
Every endpoint is idempotent (a pure function of its body; ``/plan`` writes nothing a later
request reads), so a client retries a request once when it fails (no answer, or 5xx). It prints:

- ``sent``, ``answered_200``, ``failed`` (after the retry), and each failure with
  ``in_flight_at_kill`` (its first try started before the kill and ended after it: the requests
  the killed replica held, as far as a client can tell); ``failed_not_in_flight``; the first tries
  that failed and how many of them a retry saved;
- ``recovery_s``: from the kill until Serve reports 2 running replicas, the new one included;
- ``latency_ms``: p50 and p99 per endpoint before the kill, during the recovery, and after it
  (a request's time includes its retry);
- ``processes_left``: of the replica processes and their children (the sandbox workers) seen
  during the run, those still alive once Ray is stopped (expected: 0);
- ``soak``: ``--soak-s`` seconds (default 300) of ``/act`` at ``--soak-rate`` requests/s and a
  ``/plan`` every 10 s, the RSS of the replica processes (with their sandbox workers) sampled
  every 10 s: ``rss_mb`` and ``soak_rss_growth_mb`` (last sample minus first).

Run::

    .venv/bin/python benchmarks/serve.py --faults                 # about 7 minutes
    .venv/bin/python benchmarks/serve.py --faults --soak-s 30     # a short check
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
LEMON_CONFIG = ROOT / "configs" / "lemon_level1.yaml"
RSS_EVERY_S = 10.0


def untrained_team(
    config: Path, folder: Path, overrides: tuple[str, ...] = ()
) -> tuple[TrainedPolicy, Any, Any]:
    """An untrained team of ``config`` saved to ``folder`` and loaded back as a checkpoint: the
    policy, its RLlib config and the experiment config."""
    cfg = load_config(config, ["resources.env_runners=0", "resources.envs_per_env_runner=1", *overrides])
    ppo = build_ppo_config(cfg)
    trainer = InProcessTrainer(ppo)
    try:
        trainer.learner.module.save_to_path(str(folder / "rl_module"))
    finally:
        trainer.stop()
    return TrainedPolicy.from_checkpoint(folder, ppo), ppo, cfg


def default_team(folder: Path) -> tuple[TrainedPolicy, Any, str]:
    """An untrained team of ``configs/mappo_simple_spread.yaml`` loaded back from a checkpoint folder."""
    policy, ppo, cfg = untrained_team(DEFAULT_CONFIG, folder)
    return policy, ppo, f"untrained {cfg.name} (64x64 actor)"


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


# ------------------------------------------------------------------------------------------- faults


def as_json(value: Any) -> Any:
    """An observation (numpy, nested dicts) as JSON values."""
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return np.asarray(value).tolist()


def lemon_team(folder: Path) -> tuple[TrainedPolicy, Any, dict[str, Any], str]:
    """An untrained level-1 LEMON team loaded back from a checkpoint folder, with its config."""
    policy, ppo, cfg = untrained_team(LEMON_CONFIG, folder, ("env.kwargs.task_pool=8",))
    return policy, ppo, cfg.to_dict(), f"untrained {cfg.name}"


def plan_bodies(n: int) -> list[bytes]:
    from orchestrl.envs.orchestration.tasks import generate_task

    out = []
    for seed in range(n):
        task = generate_task(1, "heldout", seed)
        body = {
            "sources": {name: frame.to_csv(index=False) for name, frame in task.sources.items()},
            "target_example": task.public.examples.to_csv(index=False),
        }
        out.append(json.dumps(body).encode())
    return out


class Recorder:
    """Requests sent by paced client threads; each retried once when it failed (no answer or 5xx)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def client(self, path: str, bodies: list[bytes], interval_s: float, offset: int = 0) -> threading.Thread:
        def run() -> None:
            conn: list[http.client.HTTPConnection | None] = [None]
            i, next_at = offset, time.monotonic()
            while not self.stop.is_set():
                record = self.send(conn, path, bodies[i % len(bodies)])
                with self.lock:
                    self.records.append(record)
                i += 1
                next_at = max(next_at + interval_s, time.monotonic() - interval_s)
                self.stop.wait(max(0.0, next_at - time.monotonic()))
            if conn[0] is not None:
                conn[0].close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def attempt(
        self, conn: list[http.client.HTTPConnection | None], path: str, body: bytes
    ) -> tuple[int, str]:
        if conn[0] is None:
            conn[0] = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn[0].request("POST", path, body=body, headers={"content-type": "application/json"})
            resp = conn[0].getresponse()
            data = resp.read()
            return resp.status, "" if resp.status == 200 else data[:160].decode(errors="replace")
        except (OSError, http.client.HTTPException) as err:
            conn[0].close()
            conn[0] = None
            return 0, f"{type(err).__name__}: {err}"[:160]

    def send(self, conn: list[http.client.HTTPConnection | None], path: str, body: bytes) -> dict[str, Any]:
        start = time.monotonic()
        first, error = self.attempt(conn, path, body)
        first_end = time.monotonic()
        status, retried = first, False
        if first == 0 or first >= 500:
            retried = True
            status, error = self.attempt(conn, path, body)
        return {
            "path": path,
            "start": start,
            "first_end": first_end,
            "end": time.monotonic(),
            "first": first,
            "status": status,
            "retried": retried,
            "error": error,
        }


def replica_pids() -> list[int]:
    """The PIDs of the team's Serve replicas among this script's descendants (their process title
    names them; Ray's state API needs the dashboard, which the local Ray here does not start)."""
    import psutil

    out = []
    for proc in psutil.Process().children(recursive=True):  # this script's local Ray only
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].startswith(f"ray::ServeReplica:{serve.APP_NAME}:team"):
            out.append(proc.pid)
    return sorted(out)


def running_replicas() -> int:
    from ray import serve as ray_serve

    app = ray_serve.status().applications.get(serve.APP_NAME)
    if app is None or "team" not in app.deployments:
        return 0
    return int(app.deployments["team"].replica_states.get("RUNNING", 0))


def family(pids: list[int]) -> set[tuple[int, float]]:
    """``pids`` and all their children now alive, as (pid, start time)."""
    import psutil

    out = set()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            out |= {(p.pid, p.create_time()) for p in [proc, *proc.children(recursive=True)]}
        except psutil.NoSuchProcess:
            continue
    return out


def alive(process: tuple[int, float]) -> bool:
    import psutil

    try:
        return psutil.Process(process[0]).create_time() == process[1]
    except psutil.NoSuchProcess:
        return False


def rss_mb(pids: list[int]) -> float:
    """RSS of the processes ``pids`` and all their children, in MB."""
    import psutil

    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            total += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def percentiles(records: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [(r["end"] - r["start"]) * 1000 for r in records]
    if not latencies:
        return {"n": 0}
    return {
        "n": len(latencies),
        "p50": round(float(np.percentile(latencies, 50)), 1),
        "p99": round(float(np.percentile(latencies, 99)), 1),
    }


def fault_run(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """The ``--faults`` run (module docstring)."""
    import signal

    policy, ppo, experiment, what = lemon_team(scratch / "team")
    act_bodies = [json.dumps({"observations": as_json(o)}).encode() for o in joint_observations(ppo, 64)]
    plans = plan_bodies(8)
    port = free_port()
    started_pids: set[tuple[int, float]] = set()
    result: dict[str, Any] = {}
    with ray_session(ResourcesSection(object_store_mb=128), scratch):
        served = ServedTeam(policy, what, "orchestration", experiment)
        serve.start(served, port=port, replicas=2)
        try:
            deadline = time.monotonic() + 300
            while running_replicas() < 2 and time.monotonic() < deadline:
                time.sleep(0.5)
            first = replica_pids()
            warm = Recorder(port)
            conn: list[http.client.HTTPConnection | None] = [None]
            for body in plans[:4] + act_bodies[:16]:  # the replicas' sandbox pools and models warm
                assert warm.send(conn, "/plan" if body in plans else "/act", body)["status"] == 200
            started_pids |= family(first)
            loadavg_before = os.getloadavg()

            load = Recorder(port)
            threads = [
                load.client("/act", act_bodies, args.act_clients / args.rate, offset=k * 8)
                for k in range(args.act_clients)
            ]
            threads.append(load.client("/plan", plans, args.plan_every_s))
            time.sleep(args.before_s)
            victim = first[0]
            started_pids |= family(first)
            killed_at = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            recovered_at = None
            while time.monotonic() - killed_at < 300:
                now_alive = replica_pids()
                if running_replicas() >= 2 and len(now_alive) >= 2 and victim not in now_alive:
                    recovered_at = time.monotonic()
                    break
                time.sleep(0.2)
            time.sleep(args.after_s)
            load.stop.set()
            for t in threads:
                t.join(180)
            loadavg_after = os.getloadavg()

            records = sorted(load.records, key=lambda r: r["start"])
            recovered = recovered_at if recovered_at is not None else float("inf")
            failures = []
            for r in records:
                if r["status"] != 200:
                    in_flight = r["start"] <= killed_at <= r["first_end"]
                    failures.append(
                        {
                            "endpoint": r["path"],
                            "status": r["status"],
                            "first_status": r["first"],
                            "at_s": round(r["start"] - killed_at, 2),
                            "in_flight_at_kill": in_flight,
                            "error": r["error"],
                        }
                    )
            first_failed = [r for r in records if r["first"] != 200]
            phases: dict[str, Any] = {}
            for path in ("/act", "/plan"):
                mine = [r for r in records if r["path"] == path]
                phases[path] = {
                    "before": percentiles([r for r in mine if r["start"] < killed_at]),
                    "during": percentiles([r for r in mine if killed_at <= r["start"] < recovered]),
                    "after": percentiles([r for r in mine if r["start"] >= recovered]),
                }
            result.update(
                {
                    "team": what,
                    "endpoints": ["POST /act", "POST /plan"],
                    "idempotent": "all: /act, /plan and /ask are functions of their body and write nothing",
                    "replicas": 2,
                    "act_rate_per_s": args.rate,
                    "act_clients": args.act_clients,
                    "plan_every_s": args.plan_every_s,
                    "killed": {"pid": victim, "after_s": args.before_s, "signal": "SIGKILL"},
                    "sent": len(records),
                    "answered_200": sum(r["status"] == 200 for r in records),
                    "failed": len(failures),
                    "failed_not_in_flight": sum(not f["in_flight_at_kill"] for f in failures),
                    "failures": failures[:20],
                    "first_try_failed": len(first_failed),
                    "first_try_failed_in_flight_at_kill": sum(
                        r["start"] <= killed_at <= r["first_end"] for r in first_failed
                    ),
                    "first_try_failed_statuses": sorted({r["first"] for r in first_failed}),
                    "saved_by_retry": sum(r["status"] == 200 for r in first_failed),
                    "recovery_s": None if recovered_at is None else round(recovered_at - killed_at, 2),
                    "latency_ms": phases,
                    "p99_during_ms": {path: phases[path]["during"].get("p99") for path in phases},
                    "fault_phase_s": round(records[-1]["end"] - records[0]["start"], 1) if records else 0,
                    "act_answered_per_s": round(
                        sum(r["path"] == "/act" for r in records)
                        / (records[-1]["end"] - records[0]["start"]),
                        1,
                    )
                    if records
                    else 0,
                    "loadavg_fault": {
                        "before": [round(x, 2) for x in loadavg_before],
                        "after": [round(x, 2) for x in loadavg_after],
                    },
                }
            )
            result["soak"] = soak(args, port, act_bodies, plans)
            result["soak_rss_growth_mb"] = result["soak"]["soak_rss_growth_mb"]
            started_pids |= family(replica_pids())
        finally:
            serve.stop(keep_serve=True)  # the local Ray ends right after
    time.sleep(5)
    left = [process for process in started_pids if alive(process)]
    result["processes_seen"] = len(started_pids)
    result["processes_left"] = len(left)
    return result


def soak(args: argparse.Namespace, port: int, act_bodies: list[bytes], plans: list[bytes]) -> dict[str, Any]:
    """``args.soak_s`` seconds at a steady rate, the replicas' RSS sampled every 10 s."""
    pids = replica_pids()
    load = Recorder(port)
    clients = 4
    threads = [load.client("/act", act_bodies, clients / args.soak_rate, offset=k) for k in range(clients)]
    threads.append(load.client("/plan", plans, 10.0))
    started = time.monotonic()
    samples = []
    while True:
        samples.append({"t_s": round(time.monotonic() - started, 1), "rss_mb": round(rss_mb(pids), 1)})
        left = args.soak_s - (time.monotonic() - started)
        if left <= 0:
            break
        time.sleep(min(RSS_EVERY_S, left))
    load.stop.set()
    for t in threads:
        t.join(180)
    records = load.records
    return {
        "seconds": args.soak_s,
        "act_rate_per_s": args.soak_rate,
        "plan_every_s": 10.0,
        "requests": len(records),
        "act_answered_per_s": round(sum(r["path"] == "/act" for r in records) / args.soak_s, 1),
        "answered_200": sum(r["status"] == 200 for r in records),
        "failed": sum(r["status"] != 200 for r in records),
        "latency_ms": {
            path: percentiles([r for r in records if r["path"] == path]) for path in ("/act", "/plan")
        },
        "replica_pids": pids,
        "rss_mb": samples,
        "soak_rss_growth_mb": round(samples[-1]["rss_mb"] - samples[0]["rss_mb"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpoint", help="A run id or checkpoint folder (default: an untrained MAPPO team)."
    )
    parser.add_argument("--run-dir", default="runs", help="Tracking store of --checkpoint's run id.")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--quick", action="store_true", help="400 requests")
    parser.add_argument("--faults", action="store_true", help="kill a replica under load, then soak")
    parser.add_argument("--rate", type=float, default=100.0, help="--faults: /act requests/s in all")
    parser.add_argument("--act-clients", type=int, default=8, help="--faults: /act client threads")
    parser.add_argument("--plan-every-s", type=float, default=2.0, help="--faults: one /plan every ...")
    parser.add_argument("--before-s", type=float, default=15.0, help="--faults: load before the kill")
    parser.add_argument("--after-s", type=float, default=20.0, help="--faults: load after recovery")
    parser.add_argument("--soak-s", type=float, default=300.0, help="--faults: the soak's seconds")
    parser.add_argument("--soak-rate", type=float, default=50.0, help="--faults: soak /act requests/s")
    args = parser.parse_args()
    requests = 400 if args.quick else args.requests

    scratch = Path(tempfile.mkdtemp(prefix="orl-serve-bench-"))
    quiet_environment(scratch)
    silence_noise(verbose=False)
    if args.faults:
        try:
            print(json.dumps(fault_run(args, scratch), indent=1))
        finally:
            from orchestrl.envs.orchestration.sandbox.pool import remove_stale_dirs

            remove_stale_dirs()  # the killed replica's sandbox pool left its directory
            shutil.rmtree(scratch, ignore_errors=True)
        return
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
