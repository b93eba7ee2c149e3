"""`orchestrl plan` without a team, on a hand-made export of ``tests/data/plan_cases``: the
synthesiser's spec is checked in the sandbox, and the stand-alone pipeline.py it writes prints the
whole wanted table."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.envs.orchestration.tables import TargetIndex

CASE = Path(__file__).resolve().parents[2] / "data" / "plan_cases" / "03_payroll_cost_by_department"
TALKS = CASE.parent / "38_top_rated_talk_submissions"


def plan_command(case: Path, out: Path) -> list[str]:
    """``orchestrl plan`` on a corpus case's sources and example rows, writing to ``out``."""
    meta = json.loads((case / "case.json").read_text())
    sources = [a for name in meta["sources"] for a in ("--source", f"{name}={case / f'{name}.csv'}")]
    return ["plan", *sources, "--target-example", str(case / "target_example.csv"), "--out", str(out)]


def pipeline_output(out: Path) -> pd.DataFrame:
    """What the written pipeline.py prints, run alone on the written data."""
    printed = subprocess.run(
        [sys.executable, str(out / "pipeline.py"), "--data", str(out / "data")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    return pd.read_csv(io.StringIO(printed))


def test_plan_without_a_team_writes_a_pipeline_that_prints_the_wanted_table(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = CliRunner().invoke(app, plan_command(CASE, out))
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["by"] == "solver" and plan["ok"] and plan["team"] is None
    output = pipeline_output(out)
    wanted = pd.read_csv(CASE / "wanted.csv")
    assert list(output.columns) == list(wanted.columns)
    assert TargetIndex(wanted).compare(output).exact


def test_plan_reads_the_description_for_what_the_example_rows_cannot_show(tmp_path: Path) -> None:
    """The five best-rated talks cannot say where the list stops; "an average review score of 4
    or more" says it. Without the words the plan holds the examples but lists every talk."""
    description = json.loads((TALKS / "case.json").read_text())["description"]
    wanted = pd.read_csv(TALKS / "wanted.csv")
    for words, exact in ((description, True), (None, False)):
        out = tmp_path / f"plan-{exact}"
        told = ["--description", words] if words else []
        result = CliRunner().invoke(app, [*plan_command(TALKS, out), *told])
        assert result.exit_code == 0, result.output
        assert json.loads((out / "plan.json").read_text())["ok"]
        output = pipeline_output(out)
        assert (len(output) == len(wanted) and TargetIndex(wanted).compare(output).exact) is exact


def test_a_description_over_the_limit_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = CliRunner().invoke(app, [*plan_command(TALKS, out), "--description", "x" * 2001])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: --description: 2,001 characters; the limit is 2,000"]
    assert not out.exists()
