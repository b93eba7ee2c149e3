"""What the on-disk task store saves: generating an orchestration task against reading it back.

Per level, ``--tasks`` training tasks (seeds from 0) are generated from scratch (the generator
itself: no in-memory or on-disk cache) and stored in a temporary store, then read back from it.
A run on a pool of 1,000 tasks pays the generation once per task and run without the store, once
per task and store with it (``orchestrl/envs/orchestration/task_store.py``).

Run::

    .venv/bin/python benchmarks/task_store.py            # levels 2-4, 30 tasks each
    .venv/bin/python benchmarks/task_store.py --levels 4 --tasks 100

Measured: ``benchmarks/RESULTS.md``, section "Task store".

It prints one JSON object and writes it to ``--out`` (default ``runs/bench/task_store.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def level_figures(level: int, count: int, root: Path) -> dict[str, float]:
    from orchestrl.envs.orchestration import tasks
    from orchestrl.envs.orchestration.task_store import TaskStore

    store = TaskStore(root)
    started = time.perf_counter()
    for seed in range(count):
        store.save(tasks._build(level, "train", seed))
    generated = time.perf_counter() - started
    started = time.perf_counter()
    loaded = [store.load(level, "train", seed) for seed in range(count)]
    read = time.perf_counter() - started
    assert all(task is not None and task.key.seed == seed for seed, task in enumerate(loaded))
    size = sum(store.path(level, "train", seed).stat().st_size for seed in range(count))
    return {
        "generate_ms": 1000 * generated / count,
        "load_ms": 1000 * read / count,
        "speedup": generated / max(read, 1e-9),
        "kb_per_task": size / count / 1024,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[2, 3, 4], choices=[1, 2, 3, 4])
    parser.add_argument("--tasks", type=int, default=30, help="tasks per level")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/task_store.json"))
    args = parser.parse_args(argv)
    if args.tasks < 1:
        parser.error(f"--tasks must be at least 1, not {args.tasks}")
    started, load_before = time.perf_counter(), os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="orl-task-store-") as root:
        levels = {level: level_figures(level, args.tasks, Path(root)) for level in args.levels}
    result = {
        "levels": levels,
        "tasks_per_level": args.tasks,
        "seconds": time.perf_counter() - started,
        "load_avg_1_5_15_before": list(load_before),
        "load_avg_1_5_15_after": list(os.getloadavg()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
