"""The benchmarks' worker pool: a seed's run must not depend on the invocation, and its workers do
not outlive it (no Ray).

Five interpreters are spawned in all (each imports torch: seconds apiece on 2 cores)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from orchestrl.training.runtime import worker_pool


def pid_and_string_hash() -> tuple[int, int]:
    return os.getpid(), hash("agent_0")


def test_each_task_gets_a_fresh_process_when_asked_and_every_process_hashes_strings_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    with worker_pool(1, tmp_path, fresh_per_task=True) as pool:
        fresh = [pool.submit(pid_and_string_hash).result(timeout=120) for _ in range(2)]
    assert fresh[0][0] != fresh[1][0]
    with worker_pool(1, tmp_path) as pool:  # the default keeps its workers
        kept = [pool.submit(pid_and_string_hash).result(timeout=120) for _ in range(2)]
    assert kept[0][0] == kept[1][0]
    # Three interpreters from two pools, as two invocations of a benchmark would start them.
    assert len({h for _, h in fresh + kept}) == 1
    assert os.environ["PYTHONHASHSEED"] == "0"


def alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_benchmark_killed_takes_its_workers_with_it(tmp_path: Path) -> None:
    # the benchmark: a pool whose worker starts a long task, then the benchmark is SIGKILLed
    script = textwrap.dedent(
        f"""
        import os, signal, time
        from pathlib import Path
        from orchestrl.training.runtime import worker_pool

        def work(path):
            Path(path).write_text(str(os.getpid()))
            time.sleep(120)

        if __name__ == "__main__":
            pool = worker_pool(1, Path({str(tmp_path)!r}))
            pool.submit(work, {str(tmp_path / "worker.pid")!r})
            while not Path({str(tmp_path / "worker.pid")!r}).exists():
                time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    (tmp_path / "bench.py").write_text(script)
    done = subprocess.run([sys.executable, str(tmp_path / "bench.py")], timeout=180, check=False)
    assert done.returncode == -9
    worker = int((tmp_path / "worker.pid").read_text())
    deadline = time.monotonic() + 30
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    if alive(worker):
        os.kill(worker, 9)
        pytest.fail(f"worker {worker} outlived the benchmark that started it")
