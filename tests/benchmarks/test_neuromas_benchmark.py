"""The NeuroMAS benchmark's v3 summary from per-run lines: the RL phase against its two controls,
the networks against the monoliths, and the goals read off them (no training)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import pytest
from credit_helpers import load_benchmark, unload_benchmark


@pytest.fixture(scope="module")
def neuromas() -> Iterator[ModuleType]:
    module = load_benchmark("neuromas")
    yield module
    unload_benchmark(module)


def run(natural: float, cloned: float, more: float | None = None) -> dict[str, float]:
    line = {
        "heldout": natural,
        "heldout_unseen_grammar": natural,
        "natural": natural,
        "cloned_heldout": cloned,
        "cloned_natural": cloned,
        "bc_epochs": 12,
        "params": 10,
        "live_params": 8,
        "cpu_ms_per_question": 0.5,
        "cpu_minutes": 1.0,
        "env_steps": 100,
    }
    if more is not None:
        line.update({"bc_more_heldout": more, "bc_more_natural": more, "rl_seconds": 60.0})
    return line


def log_of(tmp_path: Path, runs: dict[str, list[dict]], extra: str = "") -> Path:
    """The runs as the benchmark logs them (``seed N VARIANT {json}``), then ``extra``."""
    log = tmp_path / "runs.log"
    log.write_text(
        "".join(f"seed {s} {name} {json.dumps(r)}\n" for name, rs in runs.items() for s, r in enumerate(rs))
        + extra
    )
    return log


def test_the_v3_figures_and_goals_come_from_the_runs_lines(neuromas: ModuleType, tmp_path: Path) -> None:
    runs = {
        "neuromas5_every_cf": [run(0.80, 0.70, 0.72), run(0.82, 0.72, 0.73), run(0.84, 0.76, 0.70)],
        "neuromas5_every_rl": [run(0.71, 0.70, 0.72), run(0.72, 0.72, 0.73), run(0.74, 0.76, 0.70)],
        "monolithic_every": [run(0.60, 0.60), run(0.62, 0.62), run(0.64, 0.64)],
    }
    log = log_of(tmp_path, runs, "a line that is not a run\n")
    result = neuromas.tabulate(neuromas.read_log(log), {"heldout_execution_accuracy": 0.1})
    gain = result["rl_gain_over_cloning"]["neuromas5_every_cf"]["natural"]
    assert gain["per_seed"] == pytest.approx([0.10, 0.10, 0.08])
    versus_more = result["rl_vs_cloning_continued"]["neuromas5_every_cf"]["natural"]
    assert versus_more["per_seed"] == pytest.approx([0.08, 0.09, 0.14])
    assert "monolithic_every" not in result["rl_vs_cloning_continued"]  # it has no RL phase control
    shared = result["counterfactual_vs_shared_reward"]["natural"]
    assert shared["counterfactual"]["iqm"] > shared["shared"]["iqm"]
    assert result["goals"]["rl_gain"] == {
        "best_variant": "neuromas5_every_cf",
        "natural_gain": gain["iqm"],
        "ci95": gain["ci95"],
        "met": True,
    }
    assert result["live_params"]["monolithic_every"] == 8
    assert "network_vs_monolith" not in result  # no v3 network among the runs it compares
    runs["neuromas7_every"] = runs.pop("neuromas5_every_rl")
    result = neuromas.tabulate(neuromas.read_log(log_of(tmp_path, runs)), {})
    apart = result["network_vs_monolith"]["neuromas7_every"]
    nat = result["natural_accuracy"]
    difference = nat["neuromas7_every"]["iqm"] - nat["monolithic_every"]["iqm"]
    assert apart["cis_apart"] and apart["natural_iqm_difference"] == pytest.approx(difference, abs=1e-4)
    assert result["goals"]["network_vs_live_matched_monolith"]["met"]


def test_the_contextual_network_is_compared_with_the_contextual_monolith(
    neuromas: ModuleType, tmp_path: Path
) -> None:
    runs = {
        "neuromas5_every_ctx": [run(0.80, 0.80), run(0.82, 0.82), run(0.84, 0.84)],
        "monolithic_every_ctx": [run(0.70, 0.70), run(0.72, 0.72), run(0.74, 0.74)],
        "monolithic_every": [run(0.90, 0.90), run(0.92, 0.92), run(0.94, 0.94)],
    }
    versus = neuromas.tabulate(neuromas.read_log(log_of(tmp_path, runs)), {})["network_vs_monolith"]
    assert list(versus) == ["neuromas5_every_ctx"] and versus["neuromas5_every_ctx"]["cis_apart"]
    assert versus["neuromas5_every_ctx"]["natural_iqm_difference"] == pytest.approx(0.10, abs=1e-4)


def test_the_shipped_config_trains_the_benchmark_s_shipped_variant(neuromas: ModuleType) -> None:
    """configs/neuromas_text2sql.yaml holds the knobs, budget and RL phase of ``SHIPPED``, so the
    README's example trains what the benchmark measured (paths resolved from the repository)."""
    import yaml

    root = Path(neuromas.__file__).resolve().parents[1]
    config = yaml.safe_load((root / "configs" / "neuromas_text2sql.yaml").read_text())

    def resolved(value):
        if isinstance(value, list):
            return [resolved(v) for v in value]
        if isinstance(value, dict):
            return {k: str((root / v).resolve()) if k == "questions_file" else v for k, v in value.items()}
        return value

    knobs = {**neuromas.MODEL, **neuromas.VARIANTS[neuromas.SHIPPED]}
    algorithm = {k: resolved(v) for k, v in config["algorithm"].items() if k != "name"}
    assert algorithm == {k: resolved(v) for k, v in knobs.items()}
    budget = neuromas.FULL
    assert config["warm_start"]["episodes"] == 2 * budget.bc_samples
    assert config["warm_start"]["epochs"] == 5 * budget.bc_epochs
    assert config["warm_start"]["lr"] == neuromas.BC["lr"]
    assert config["model"]["hidden"] == neuromas.HIDDEN
    assert config["training"]["lr"] == neuromas.RL_PHASE["lr"]
    assert config["stop"]["iterations"] == budget.rl_iterations * neuromas.RL_PHASE["rl_iterations"] // 2
    assert config["training"]["train_batch_size"] == budget.rl_batch


def test_the_rl_curve_is_summarised_point_by_point_over_seeds(neuromas: ModuleType, tmp_path: Path) -> None:
    """``--rl-curve``'s points survive the log line and come back as one IQM per set and iteration;
    the RL phase's length is reported with them."""

    def curve(offset: float) -> list[dict[str, float]]:
        return [
            {"iteration": it, "train": 0.9 + offset + it / 100, "validation": 0.8 + offset, "dev": 0.7}
            for it in (0, 8, 16)
        ]

    runs = [{**run(0.8, 0.8, 0.7), "rl_iterations": 16, "rl_curve": curve(0.01 * s)} for s in range(3)]
    result = neuromas.tabulate(neuromas.read_log(log_of(tmp_path, {neuromas.SHIPPED: runs})), {})
    points = result["rl_curve"][neuromas.SHIPPED]
    assert [p["iteration"] for p in points] == [0, 8, 16]
    assert points[2]["train"]["iqm"] == pytest.approx(0.9 + 0.01 + 0.16, abs=1e-4)  # the median seed
    assert points[0]["validation"]["ci95"][0] <= 0.81 <= points[0]["validation"]["ci95"][1]
    assert points[1]["dev"]["iqm"] == pytest.approx(0.7)
    assert result["rl_iterations"] == {neuromas.SHIPPED: 16}


def test_the_early_stopped_network_meets_monoliths_cloned_the_same_way(
    neuromas: ModuleType, tmp_path: Path
) -> None:
    runs = {
        "neuromas5_every_ctx_esdev": [run(0.86, 0.86), run(0.88, 0.88), run(0.90, 0.90)],
        "monolithic_every_ctx_esdev": [run(0.80, 0.80), run(0.81, 0.81), run(0.82, 0.82)],
        "monolithic_compute_ctx_esdev": [run(0.85, 0.75), run(0.88, 0.78), run(0.91, 0.81)],
        "monolithic_every_ctx": [run(0.99, 0.99), run(0.99, 0.99), run(0.99, 0.99)],
    }
    result = neuromas.tabulate(neuromas.read_log(log_of(tmp_path, runs)), {})
    live = result["network_vs_monolith"]["neuromas5_every_ctx_esdev"]
    compute = result["network_vs_compute_matched"]["neuromas5_every_ctx_esdev"]
    assert live["cis_apart"] and live["natural_iqm_difference"] == pytest.approx(0.07, abs=1e-4)
    assert live["heldout_cis_apart"] and live["heldout_iqm_difference"] == pytest.approx(0.07, abs=1e-4)
    assert not compute["cis_apart"] and compute["natural_iqm_difference"] == pytest.approx(0.0, abs=1e-4)
    assert result["goals"]["network_vs_live_matched_monolith"]["met"]
    assert "rl_gain" not in result["goals"]  # a variant's two budget PPO iterations are no RL phase
    assert neuromas.SAME_WIDTH["monolithic_compute_ctx_esdev"] == "monolithic_every_ctx"


def test_runs_scored_at_different_iterations_are_refused_naming_the_variant(
    neuromas: ModuleType, tmp_path: Path
) -> None:
    every_8 = [{"iteration": it, "train": 0.9} for it in (0, 8, 16)]
    every_16 = [{"iteration": it, "train": 0.9} for it in (0, 16)]
    runs = [{**run(0.8, 0.8, 0.7), "rl_iterations": 16, "rl_curve": c} for c in (every_8, every_16)]
    with pytest.raises(SystemExit, match=f"{neuromas.SHIPPED}: its runs scored .* different iterations"):
        neuromas.tabulate(neuromas.read_log(log_of(tmp_path, {neuromas.SHIPPED: runs})), {})


def test_each_run_line_and_the_report_record_the_environment_runs_ran_in(
    neuromas: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The runs in threads, each returning a fixed result instead of training."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(neuromas, "run_text2sql", lambda *args: run(0.8, 0.7, 0.75))
    monkeypatch.setattr(neuromas, "worker_pool", lambda jobs, root: ThreadPoolExecutor(jobs))
    saved = dict(os.environ)  # the benchmark sets its run dir's defaults
    try:
        result = neuromas.main(["--quick", "--variants", neuromas.SHIPPED, "--seeds", "2"])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    (tmp_path / "stderr.log").write_text(capsys.readouterr().err)
    logged = neuromas.read_log(tmp_path / "stderr.log")[neuromas.SHIPPED]
    libraries = logged[0]["environment"]["libraries"]
    assert libraries["torch"] == version("torch") and sorted(logged) == [0, 1]
    assert result["environments"] == {
        "library_sets": [{"libraries": libraries, "runs": 2}],
        "unrecorded_runs": 0,
    }
