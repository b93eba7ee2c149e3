"""`orchestrl plan` with a planning team (``orchestration_planning``): a user's CSV files reach the
team through the env's own task of files, the team's spec runs, and a spec it cannot make good is
rescued by the synthesiser, said in the output. No Ray: the team is made in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_helpers import planning_team
from typer.testing import CliRunner

from orchestrl.apps.orchestration.plan import Planner
from orchestrl.cli import app
from orchestrl.deploy.team import find_team
from orchestrl.envs.orchestration.planning.grammar import generate

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plan"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planning_team(tmp_path_factory.mktemp("planning") / "runs")


def test_a_planning_team_plans_a_users_files(team: Path, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "--checkpoint",
            str(team),
            "--source",
            f"orders={EXAMPLES / 'orders.csv'}",
            "--target-example",
            str(EXAMPLES / "target_example.csv"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    written = json.loads((out / "plan.json").read_text())
    assert written["ok"] and written["by"] in ("team", "solver")
    assert written["team"] is not None and written["team"]["ran"], written["notes"]
    if written["by"] == "solver":
        assert any("the solver steps in" in n for n in written["notes"])


def test_the_team_writes_the_label_of_a_task_it_was_trained_on(team: Path) -> None:
    """Cloned on its training tasks, the team's own spec (no fallback) holds the examples of most;
    the user's words reach the team's task as they reached it in training."""
    planner = Planner.from_team(find_team(str(team)))
    try:
        held = 0
        for seed in range(6):
            task = generate("train", seed)
            plan = planner.plan(task.sources, task.examples, fallback=False, description=task.description)
            assert planner.raw.task.description == task.description
            assert planner.raw.task.choices.options == task.choices.options
            held += plan.by == "team" and plan.match.ok
    finally:
        planner.close()
    assert held >= 3
