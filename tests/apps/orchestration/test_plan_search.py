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
