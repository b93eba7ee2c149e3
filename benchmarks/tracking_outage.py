"""What the tracking journal costs while the MLflow server is up, and what an outage costs training.

What it measures, against a real ``mlflow server`` on 127.0.0.1 (SQLite backend, proxied
artifacts, in a temp dir):

- ``write_ms``: one iteration's tracking write, i.e. ``RunStore.log_metrics`` with 30 curated
  metrics, timed per call (median, p90, mean; wall and the calling process's CPU):
  ``direct_up`` (no journal, the server up: what ``orchestrl train`` did before the journal),
  ``journal_up`` (through the journal, the server up), ``journal_refused`` (the server process
  stopped: connections refused) and ``journal_frozen`` (the server process frozen with SIGSTOP,
  like a network that drops packets: the first write waits for MLflow's HTTP timeout, the rest
  are queued at once). ``first_write_after_*_ms`` is the one write that finds the server gone;
- ``journal_bookkeeping_us``: the journal alone (append, cursor and state file) with a send that
  does nothing, per write: its overhead, without the network noise;
- ``drain``: how long the queued writes take to reach the server once it answers again;
- ``train_iteration_s`` (unless ``--no-train``): the median wall time of iterations 3-8 of a tiny
  ``orchestrl train`` run (mappo, simple_spread N=2) with the server up, and with the server stopped
  after iteration 2 and never back.

Run:
    python benchmarks/tracking_outage.py
    python benchmarks/tracking_outage.py --quick    # fewer writes, no train runs

Expected: the journal's bookkeeping far below an HTTP write's own cost; with the server stopped,
only the first write waits (a refused connection: at once; a frozen server: MLflow's HTTP timeout
as orchestrl sets it), the rest are queued at once; ``journal_run_steps_in_order_once`` true; a
train iteration no slower with the server down. Figures: ``benchmarks/RESULTS.md``, section
"Tracking outage".
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "helpers"))  # the tests' MLflow server launcher

from multinode import MlflowServer  # noqa: E402

from orchestrl.tracking.journal import Journal  # noqa: E402
from orchestrl.tracking.store import RunStore  # noqa: E402

METRICS = {f"shared/metric_{i:02d}": 0.5 for i in range(30)}


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
        "mean": round(statistics.fmean(ordered), 3),
        "n": len(ordered),
    }


def timed_writes(store: RunStore, run_id: str, first_step: int, count: int) -> tuple[list[float], float]:
    """Per-write wall ms of ``count`` metric batches, and the CPU ms per write."""
    times, cpu0 = [], cpu_s()
    for step in range(first_step, first_step + count):
        start = time.perf_counter()
        store.log_metrics(run_id, {**METRICS, "step": float(step)}, step)
        times.append((time.perf_counter() - start) * 1000)
    return times, (cpu_s() - cpu0) * 1000 / count


@contextlib.contextmanager
def frozen(server: MlflowServer) -> Iterator[None]:
    """The server's processes stopped (SIGSTOP): connections open, nothing answers."""
    assert server.process is not None
    os.killpg(server.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(server.process.pid, signal.SIGCONT)


def journal_bookkeeping_us(folder: Path, count: int) -> float:
    journal = Journal(folder, "http://bench", send=lambda entry: None, echo=lambda _: None)
    start = time.perf_counter()
    for step in range(count):
        journal.submit({"op": "log", "run_id": "r", "metrics": METRICS, "step": step, "time": 0})
    elapsed = time.perf_counter() - start
    journal.close()
    return round(elapsed / count * 1e6, 1)


def until(predicate: Callable[[], bool], timeout_s: float) -> float:
    start = time.perf_counter()
    while not predicate():
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError("the journal did not drain")
        time.sleep(0.05)
    return time.perf_counter() - start


def writes(server: MlflowServer, root: Path, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    direct = RunStore(server.uri)
    exp = direct.experiment("bench_outage", root)
    run = direct.create_run(exp, "direct", {})
    times, cpu = timed_writes(direct, run, 1, count)
    out["direct_up"] = {**stats(times), "cpu_ms": round(cpu, 3)}

    lines: list[str] = []
    with RunStore(server.uri, root / "runs", echo=lines.append) as store:
        run = store.create_run(exp, "journal", {})
        times, cpu = timed_writes(store, run, 1, count)
        out["journal_up"] = {**stats(times), "cpu_ms": round(cpu, 3)}

        server.stop()
        times, cpu = timed_writes(store, run, count + 1, count + 1)
        out["first_write_after_stop_ms"] = round(times[0], 3)
        out["journal_refused"] = {**stats(times[1:]), "cpu_ms": round(cpu, 3)}
        journal = store.journal
        assert journal is not None
        waiting = journal.pending
        server.start()
        out["drain"] = {"writes": waiting, "s_after_ready": round(until(lambda: not journal.down, 60), 2)}

        with frozen(server):
            times, cpu = timed_writes(store, run, 2 * count + 2, count + 1)
        out["first_write_after_freeze_ms"] = round(times[0], 3)
        out["journal_frozen"] = {**stats(times[1:]), "cpu_ms": round(cpu, 3)}
        waiting = journal.pending
        drain_s = round(until(lambda: not journal.down, 60), 2)
        out["drain_after_thaw"] = {"writes": waiting, "s": drain_s}
        history = store.metric_history(run)["step"]
    out["journal_run_steps_in_order_once"] = [s for s, _ in history] == list(range(1, 3 * count + 3))
    return out


def train_iterations(server: MlflowServer, root: Path, stop_after: int | None) -> float:
    """Median wall seconds of iterations 3-8 of a tiny train run (the server stopped after
    iteration ``stop_after``, if given)."""
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.train import train

    cfg = validate_config(
        {
            "name": "bench_outage_train",
            "seed": 0,
            "run_dir": str(root),
            "env": {"name": "simple_spread", "kwargs": {"N": 2, "max_cycles": 10}},
            "algorithm": {"name": "mappo"},
            "model": {"hidden": [32]},
            "resources": {"env_runners": 0, "envs_per_env_runner": 2, "num_cpus": 2},
            "training": {"train_batch_size": 200, "minibatch_size": 100, "num_epochs": 2},
            "stop": {"iterations": 8},
            "tracking": {"uri": server.uri, "checkpoint_every": 1},
        }
    )
    stamps: list[float] = []

    def echo(line: str) -> None:
        if line.startswith("iter "):
            stamps.append(time.perf_counter())
            if stop_after is not None and len(stamps) == stop_after:
                server.stop()

    train(cfg, echo=echo)
    return round(statistics.median(b - a for a, b in itertools.pairwise(stamps[1:])), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 writes a phase, no train runs")
    parser.add_argument("--writes", type=int, default=200, help="metric batches per phase")
    parser.add_argument("--no-train", action="store_true", help="skip the train iteration comparison")
    args = parser.parse_args()
    count = 50 if args.quick else args.writes
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    with tempfile.TemporaryDirectory(prefix="orl-bench-out-", dir="/tmp") as tmp:
        root = Path(tmp)
        server = MlflowServer(root / "server")
        out: dict[str, Any] = {"load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
        try:
            server.start()
            out["journal_bookkeeping_us"] = journal_bookkeeping_us(root / "bookkeeping", 2000)
            out["write_ms"] = writes(server, root, count)
            if not (args.quick or args.no_train):
                up = train_iterations(server, root / "up", None)
                down = train_iterations(server, root / "down", 2)
                server.start()
                out["train_iteration_s"] = {"server_up": up, "server_down_from_iteration_3": down}
        finally:
            server.stop()
        out["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
