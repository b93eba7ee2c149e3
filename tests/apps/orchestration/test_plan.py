"""`orchestrl plan` on a user's own CSV files (written here from held-out level-1 tasks), without
Ray: the team's spec and a pipeline.py that runs alone, the solver's fallback, the limits and bad
input (one line, exit 2, nothing written), and `POST /plan`'s HTTP semantics through the router."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from deploy_helpers import write_public_inputs
from typer.testing import CliRunner

from orchestrl.apps.orchestration.plan import Limits, PlanInputError, Planner, check_limits
from orchestrl.cli import app
from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import ServedTeam
from orchestrl.deploy.team import find_team
from orchestrl.envs.orchestration.tasks import generate_task

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plan"
"""The README's example: a held-out level-1 task's public inputs (orders, 16 without a channel;
five rows of the orders with a channel, with revenue = qty x unit_price)."""
TEAM_SOLVES = 9
"""A held-out level-1 task the warm-started team's own spec solves and the synthesiser plans
quickly (measured: the team's spec solved seeds 0, 4, 5, 6, 8, 9 and 10 of held-out seeds 0-11;
the untrained team's none)."""


def plan(checkpoint: Path, args: list[str], example: Path, out: Path, *extra: str) -> Any:
    sources = [a for s in args for a in ("--source", s)]
    cmd = [
        "plan",
        "--checkpoint",
        str(checkpoint),
        *sources,
        "--target-example",
        str(example),
        "--out",
        str(out),
    ]
    return CliRunner().invoke(app, [*cmd, *extra])


def holds_every_row(output: pd.DataFrame, examples: pd.DataFrame) -> bool:
    columns = sorted(examples.columns)
    got = {tuple(map(str, r)) for r in output[columns].itertuples(index=False)}
    return all(tuple(map(str, r)) in got for r in examples[columns].itertuples(index=False))


def test_the_team_plans_and_its_pipeline_runs_alone(plan_teams: dict[str, Path], tmp_path: Path) -> None:
    task = generate_task(1, "heldout", TEAM_SOLVES)
    args, example = write_public_inputs(task, tmp_path / "mine")
    out = tmp_path / "plan"
    result = plan(plan_teams["warm"], args, example, out)
    assert result.exit_code == 0, result.output
    assert "nodes:" in result.stdout
    assert "the team's spec: matches: it holds every example row" in result.stdout
    written = json.loads((out / "plan.json").read_text())
    assert (written["by"], written["ok"], written["notes"]) == ("team", True, [])
    assert (out / "spec.yaml").read_text() == written["spec"]

    ran = subprocess.run(
        [sys.executable, str(out / "pipeline.py"), "--data", str(out / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    output = pd.read_csv(io.StringIO(ran.stdout))
    examples = pd.read_csv(example)
    assert sorted(output.columns) == sorted(examples.columns)
    assert holds_every_row(output, examples)
    assert len(output) == written["match"]["rows"]

    wanted = len(task.target)  # the hidden target's size, known to this test only
    for rows, code in ((wanted, 0), (wanted + 1, 1)):  # the team's own spec, checked on its row count
        again = plan(
            plan_teams["warm"],
            args,
            example,
            tmp_path / f"rows{rows}",
            "--target-rows",
            str(rows),
            "--no-fallback",
        )
        assert again.exit_code == code, again.output
        assert f"output rows for {rows} wanted" in again.stdout


def test_the_readme_example_plans(plan_teams: dict[str, Path], tmp_path: Path) -> None:
    args = [f"orders={EXAMPLES / 'orders.csv'}"]
    result = plan(plan_teams["warm"], args, EXAMPLES / "target_example.csv", tmp_path / "plan")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["ok"] is True


def test_when_the_team_fails_the_solver_steps_in_and_says_so(plan_teams: dict[str, Path]) -> None:
    team = find_team(str(plan_teams["untrained"]))
    planner = Planner.from_team(team)
    task = generate_task(1, "heldout", TEAM_SOLVES)
    try:
        alone = planner.plan(dict(task.sources), task.public.examples, fallback=False)
        helped = planner.plan(dict(task.sources), task.public.examples)
    finally:
        planner.close()
    assert alone.by == "team" and not alone.match.ok
    assert helped.by == "solver" and helped.match.ok and helped.solver_seconds is not None
    assert any("the solver steps in" in n or "no valid spec" in n for n in helped.notes), helped.notes
    assert (helped.team is None) == (alone.spec_yaml is None)
    for plan in (alone, helped):  # what /plan answers in process equals what comes over HTTP
        assert json.loads(json.dumps(plan.as_json())) == plan.as_json()


def test_no_fallback_reports_the_team_attempt_and_exits_1(
    plan_teams: dict[str, Path], tmp_path: Path
) -> None:
    args, example = write_public_inputs(generate_task(1, "heldout", TEAM_SOLVES), tmp_path / "mine")
    result = plan(plan_teams["untrained"], args, example, tmp_path / "plan", "--no-fallback")
    assert result.exit_code == 1
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["by"] == "team"


def test_limits_name_what_is_over() -> None:
    frame = pd.DataFrame({"a": range(11), "b": range(11)})
    small = Limits(tables=1, target_columns=1, example_rows=2, rows=10, columns=64)
    cases = [
        ({"t": frame.head(3)}, frame.head(2)[["a"]], None),
        (
            {"t": frame.head(3), "u": frame.head(3)},
            frame.head(2)[["a"]],
            "sources: 2 tables; this team takes at most 1",
        ),
        ({"t": frame}, frame.head(2)[["a"]], "t: 11 rows; the limit is 10"),
        (
            {"my-orders": frame.head(3)},
            frame.head(2)[["a"]],
            "my-orders: a table's name is letters, digits and _, not starting with a digit",
        ),
        (
            {"t": frame.head(3)},
            frame.head(2),
            "target_example: 2 columns; the team's observation has room for 1",
        ),
        (
            {"t": frame.head(3)},
            frame.head(3)[["a"]],
            "target_example: 3 rows; give at most 2 (the team reads that many)",
        ),
    ]
    for sources, examples, error in cases:
        if error is None:
            check_limits(sources, examples, small)
            continue
        with pytest.raises(PlanInputError) as caught:
            check_limits(sources, examples, small)
        assert str(caught.value) == error


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("two_tables", "error: --source sources: 2 tables; this team takes at most 1"),
        ("seven_examples", "error: --target-example target_example: 7 rows; give at most 6 (the team"),
        ("missing_file", "no such file"),
        ("empty_file", "empty: a CSV header and at least one row are needed"),
        ("not_utf8", "not UTF-8 text (byte 17)"),
        ("short_row", "row 3 has 2 fields, the header has 3"),
        ("long_row", "row 2 has 4 fields, the header has 3"),
        ("same_name_twice", "the column name 'qty' appears twice in the header"),
        ("unproducible", "column 'region': no source column holds its values ('Mars'); only numbers"),
        ("no_equals", "expected NAME=FILE.csv"),
        ("bad_table_name", "--source my-orders: a table's name is letters, digits and _"),
        ("not_orchestration", "a team of the 'matrix' family cannot plan"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    case: str, message: str, plan_teams: dict[str, Path], runs: dict[str, Any], tmp_path: Path
) -> None:
    task = generate_task(1, "heldout", TEAM_SOLVES)
    args, example = write_public_inputs(task, tmp_path / "mine")
    checkpoint = plan_teams["warm"]
    if case == "two_tables":
        args = [*args, args[0].replace(args[0].split("=")[0], "again", 1)]
    elif case == "seven_examples":
        pd.concat([task.public.examples] * 2).head(7).to_csv(example, index=False)
    elif case == "missing_file":
        args = [args[0] + ".gone"]
    elif case == "empty_file":
        (tmp_path / "empty.csv").write_text("")
        args = [f"orders={tmp_path / 'empty.csv'}"]
    elif case in ("not_utf8", "short_row", "long_row", "same_name_twice"):
        text = {
            "not_utf8": "id,name,qty\n1,caf\xe9,2\n".encode("latin-1"),
            "short_row": b"id,name,qty\n1,a,2\n2,b\n",
            "long_row": b"id,name,qty\n1,a,2,9\n",
            "same_name_twice": b"id,qty,qty\n1,2,3\n",
        }[case]
        (tmp_path / "bad.csv").write_bytes(text)
        args = [f"orders={tmp_path / 'bad.csv'}"]
    elif case == "unproducible":
        examples = task.public.examples.copy()
        examples.insert(0, "region", "Mars")
        examples.to_csv(example, index=False)
    elif case == "bad_table_name":
        args = ["my-" + args[0]]
    elif case == "no_equals":
        args = ["orders"]
    elif case == "not_orchestration":
        checkpoint = runs["matrix"][0]
    out = tmp_path / "plan"
    result = plan(checkpoint, args, example, out)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not out.exists()


@pytest.fixture(scope="module")
def served(plan_teams: dict[str, Path]) -> ServedTeam:
    team = find_team(str(plan_teams["warm"]))
    policy = team.policy(team.rllib_config("train"))
    return ServedTeam(policy, str(team.checkpoint), "orchestration", team.config.to_dict())


def test_plan_endpoint_answers_and_names_bad_fields(served: ServedTeam) -> None:
    router = serve.TeamRouter(served)
    assert router.handle("GET", "/", b"")[1]["endpoints"] == {"/act": "POST", "/plan": "POST"}
    body = json.loads((EXAMPLES / "request.json").read_text())  # the README's curl
    assert body == {
        "sources": {"orders": (EXAMPLES / "orders.csv").read_text()},
        "target_example": (EXAMPLES / "target_example.csv").read_text(),
    }
    status, answer = router.handle("POST", "/plan", json.dumps(body).encode())
    assert status == 200, answer
    assert (answer["by"], answer["ok"]) == ("team", True)
    assert answer["pipeline"].startswith('"""Pipeline compiled by orchestrl')
    bad = [
        ({}, "sources"),
        ({**body, "target_example": ""}, "target_example"),
        ({**body, "sources": {"orders": 3}}, "sources.orders"),
        ({**body, "target_rows": "many"}, "target_rows"),
        ({**body, "description": 3}, "description"),
        ({**body, "description": "x" * 2001}, "description"),
        ({**body, "sources": {**body["sources"], "again": next(iter(body["sources"].values()))}}, "sources"),
    ]
    for request, field in bad:
        status, payload = router.handle("POST", "/plan", json.dumps(request).encode())
        assert (status, payload["field"]) == (400, field), payload
