"""The BenchMARL peer of benchmarks/spread_wallclock.py: its logged runs are summarised with the same
statistics as mappo's and shown beside them in RESULTS; without BenchMARL the report says why.
No training here (the peer itself needs ``make peers``' environment)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from credit_helpers import load_benchmark, unload_benchmark


@pytest.fixture(scope="module")
def wallclock() -> Iterator[ModuleType]:
    module = load_benchmark("spread_wallclock")
    yield module
    unload_benchmark(module)


def run(curve: list[list[float]]) -> dict:
    return {"build_s": 1.0, "eval_s": 2.0, "evaluations": len(curve), "curve": curve}


def peer(seed: int, curve: list[list[float]]) -> dict:
    settings = {
        "algorithm": "mappo (BenchMARL defaults)",
        "frames_per_batch": 6000,
        "lr": 5e-5,
        "gamma": 0.99,
    }
    return {"seed": seed, "budget_s": 60.0, **run(curve), "settings": settings}


def write_log(path: Path, wallclock: ModuleType, with_peer: bool) -> Path:
    lines = [
        f"{wallclock.RUN_LINE} {json.dumps([0, 60.0, run([[5.0, 16000, -70.0], [10.0, 32000, -58.0]]), {}])}",
        f"{wallclock.RUN_LINE} {json.dumps([1, 60.0, run([[5.0, 16000, -59.0], [10.0, 32000, -50.0]]), {}])}",
    ]
    if with_peer:
        lines += [
            f"{wallclock.PEER_LINE} {json.dumps(peer(0, [[20.0, 6000, -80.0], [40.0, 12000, -59.5]]))}",
            f"{wallclock.PEER_LINE} {json.dumps(peer(1, [[20.0, 6000, -90.0], [40.0, 12000, -70.0]]))}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_peer_runs_get_mappos_statistics(wallclock: ModuleType, tmp_path: Path) -> None:
    log = write_log(tmp_path / "spread.log", wallclock, with_peer=True)
    result = wallclock.main(["--summarise", str(log)])
    assert result["per_seed_seconds_to_minus_60"] == {"0": 10.0, "1": 5.0}
    side = result["peer"]
    assert side["per_seed_seconds_to_minus_60"] == {"0": 40.0, "1": None}
    assert side["never_reached"] == [1]
    assert side["return_at_seconds"]["30"]["iqm"] == pytest.approx(-85.0)
    assert side["curves"]["0"] == [[20.0, 6000, -80.0], [40.0, 12000, -59.5]]
    assert side["env_steps_per_s"]["iqm"] == pytest.approx(300.0)
    assert result["env_steps_per_s_vs_peer"] == pytest.approx(3200 / 300, abs=0.01)


def test_without_peer_runs_the_report_says_so(wallclock: ModuleType, tmp_path: Path) -> None:
    log = write_log(tmp_path / "spread.log", wallclock, with_peer=False)
    result = wallclock.main(["--summarise", str(log)])
    assert result["peer"] == {"skipped": "no BenchMARL runs in the logs"}
    assert "env_steps_per_s_vs_peer" not in result


def test_a_missing_peer_environment_is_named(wallclock: ModuleType, tmp_path: Path) -> None:
    absent = tmp_path / "nowhere" / "python"
    assert str(absent) in wallclock.peer_missing(absent) and "make peers" in wallclock.peer_missing(absent)
    # orchestrl's own environment has no BenchMARL (its torch and PettingZoo conflict with it)
    assert "cannot import benchmarl" in wallclock.peer_missing(Path(sys.executable))
    with pytest.raises(SystemExit, match="--peer-only: no BenchMARL environment"):
        wallclock.main(["--peer-only", "--peer-python", str(absent)])


def test_results_show_the_peer_beside_mappo(
    wallclock: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = load_benchmark("results")
    try:
        write_log(tmp_path / results.SPREAD_LOG, wallclock, with_peer=True)
        monkeypatch.setattr(results, "LOGS", tmp_path)
        text = "\n".join(results.spread_wallclock_part())
        assert "BenchMARL mappo" in text and "BenchMARL mappo (BenchMARL defaults)" in text
        assert "| seconds to -60 | 7.5 s" in text  # mappo's IQM of 10 and 5 s
        assert "| 40.0 s" not in text and "never" in text  # the peer: 40 s and never, per seed
        (tmp_path / results.SPREAD_LOG).write_text(
            (tmp_path / results.SPREAD_LOG).read_text().replace(wallclock.PEER_LINE, "dropped")
        )
        assert "No BenchMARL runs in the log" in "\n".join(results.spread_wallclock_part())
    finally:
        unload_benchmark(results)
