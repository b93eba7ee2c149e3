"""The curriculum summary ends with the last stage's best episode, when its env handed one over."""

from __future__ import annotations

from pathlib import Path

from orchestrl.tracking.names import BEST_EPISODE_DIR
from orchestrl.tune.curriculum import CurriculumSummary, StageSummary, summary_text


def _summary(checkpoint: str) -> CurriculumSummary:
    summary = CurriculumSummary("demo", "parent", "exp", "sqlite:///x.db", "/tune")
    summary.stages.append(StageSummary(0, "level1", "run", 3, "budget", 0.5, checkpoint))
    return summary


def test_the_summary_prints_the_best_spec_saved_next_to_the_final_checkpoint(tmp_path: Path) -> None:
    best = tmp_path / "checkpoint_000003" / BEST_EPISODE_DIR
    best.mkdir(parents=True)
    (best / "spec.yaml").write_text("nodes:\n- id: agent_0\n  role: filter\n")
    (best / "best_episode_score.txt").write_text("1.2345\n")
    text = summary_text(_summary(str(tmp_path / "checkpoint_000003" / "algorithm")))
    assert "best spec of the last stage (score 1.234)" in text and "role: filter" in text


def test_the_summary_prints_the_pipeline_and_the_reference_figures(tmp_path: Path) -> None:
    best = tmp_path / "checkpoint_000003" / BEST_EPISODE_DIR
    best.mkdir(parents=True)
    (best / "spec.yaml").write_text("nodes: []\n")
    (best / "pipeline.py").write_text("def node_0(in0):\n    return in0\n")
    summary = _summary(str(tmp_path / "checkpoint_000003" / "algorithm"))
    summary.stages[0].references = {"random_team_success": 0.0, "solver_success": 0.9}
    text = summary_text(summary)
    assert "0.5, random_team_success 0.00, solver_success 0.90 |" in text
    assert "its generated pipeline" in text and "def node_0(in0):" in text


def test_no_best_episode_no_spec_section(tmp_path: Path) -> None:
    assert "best spec" not in summary_text(_summary(str(tmp_path / "checkpoint_000001" / "algorithm")))
