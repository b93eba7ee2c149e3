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


def test_plan_without_a_team_writes_a_pipeline_that_prints_the_wanted_table(tmp_path: Path) -> None:
    meta = json.loads((CASE / "case.json").read_text())
    sources = [a for name in meta["sources"] for a in ("--source", f"{name}={CASE / f'{name}.csv'}")]
    out = tmp_path / "plan"
    result = CliRunner().invoke(
        app, ["plan", *sources, "--target-example", str(CASE / "target_example.csv"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads((out / "plan.json").read_text())
    assert plan["by"] == "solver" and plan["ok"] and plan["team"] is None
    printed = subprocess.run(
        [sys.executable, str(out / "pipeline.py"), "--data", str(out / "data")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    output = pd.read_csv(io.StringIO(printed))
    wanted = pd.read_csv(CASE / "wanted.csv")
    assert list(output.columns) == list(wanted.columns)
    assert TargetIndex(wanted).compare(output).exact


TALKS = CASE.parent / "38_top_rated_talk_submissions"


def test_plan_reads_the_description_for_what_the_example_rows_cannot_show(tmp_path: Path) -> None:
    """The five best-rated talks cannot say where the list stops; "an average review score of 4
    or more" says it. Without the words the plan holds the examples but lists every talk."""
    meta = json.loads((TALKS / "case.json").read_text())
    sources = [a for name in meta["sources"] for a in ("--source", f"{name}={TALKS / f'{name}.csv'}")]
    wanted = pd.read_csv(TALKS / "wanted.csv")
    for words, exact in ((meta["description"], True), (None, False)):
        out = tmp_path / f"plan-{exact}"
        told = ["--description", words] if words else []
        cmd = ["plan", *sources, "--target-example", str(TALKS / "target_example.csv"), "--out", str(out)]
        result = CliRunner().invoke(app, [*cmd, *told])
        assert result.exit_code == 0, result.output
        plan = json.loads((out / "plan.json").read_text())
        assert plan["ok"]
        printed = subprocess.run(
            [sys.executable, str(out / "pipeline.py"), "--data", str(out / "data")],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        output = pd.read_csv(io.StringIO(printed))
        assert (len(output) == len(wanted) and TargetIndex(wanted).compare(output).exact) is exact


def test_a_description_over_the_limit_is_one_line_exit_2_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    sources = ["--source", f"submissions={TALKS / 'submissions.csv'}"]
    cmd = ["plan", *sources, "--target-example", str(TALKS / "target_example.csv"), "--out", str(out)]
    result = CliRunner().invoke(app, [*cmd, "--description", "x" * 2001])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == ["error: --description: 2,001 characters; the limit is 2,000"]
    assert not out.exists()
