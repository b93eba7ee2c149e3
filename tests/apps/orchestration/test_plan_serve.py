"""`POST /plan`'s limits through the router (no Ray): a table beyond the server's rows or columns is
413 (a CSV of 10^6 columns refused on its header, before it is parsed), a plan beyond the time
limit 504, and hostile tables 4xx with nothing written and the router still planning."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import ServedTeam
from orchestrl.deploy.limits import ServeLimits
from orchestrl.deploy.team import find_team

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "plan"


@pytest.fixture(scope="module")
def served(plan_teams: dict[str, Path]) -> ServedTeam:
    team = find_team(str(plan_teams["warm"]))
    policy = team.policy(team.rllib_config("train"))
    return ServedTeam(policy, str(team.checkpoint), "orchestration", team.config.to_dict())


@pytest.fixture(scope="module")
def body() -> dict[str, Any]:
    return json.loads((EXAMPLES / "request.json").read_text())


def post(router: serve.TeamRouter, body: Any) -> tuple[int, dict[str, Any]]:
    return router.handle("POST", "/plan", json.dumps(body).encode())


def test_a_table_beyond_the_servers_rows_or_columns_is_413(served: ServedTeam, body: dict[str, Any]) -> None:
    orders = body["sources"]["orders"]
    rows = len(orders.strip().splitlines()) - 1
    columns = len(orders.splitlines()[0].split(","))
    router = serve.TeamRouter(replace(served, limits=ServeLimits(table_rows=rows - 1)))
    assert post(router, body) == (
        413,
        {"error": f"sources.orders: {rows} rows; the limit is {rows - 1}", "field": "sources.orders"},
    )
    router = serve.TeamRouter(replace(served, limits=ServeLimits(table_columns=columns - 1)))
    status, payload = post(router, body)
    assert (status, payload["error"]) == (
        413,
        f"sources.orders: {columns} columns; the limit is {columns - 1}",
    )
    widest = max(columns, len(body["target_example"].splitlines()[0].split(",")))
    router = serve.TeamRouter(replace(served, limits=ServeLimits(table_rows=rows, table_columns=widest)))
    assert post(router, body)[0] == 200  # at the limits: planned


def test_a_csv_of_a_million_columns_is_refused_on_its_header(
    served: ServedTeam, body: dict[str, Any]
) -> None:
    router = serve.TeamRouter(served)
    wide = ",".join(f"c{i}" for i in range(1_000_000)) + "\n" + ",".join("1" * 1_000_000) + "\n"
    started = time.monotonic()
    status, payload = post(router, {**body, "sources": {"orders": wide}})
    assert time.monotonic() - started < 10
    assert (status, payload["error"]) == (413, "sources.orders: 1,000,000 columns; the limit is 64")
    status, payload = post(router, {**body, "target_example": wide})
    assert (status, payload["field"]) == (413, "target_example")


def test_a_plan_beyond_the_time_limit_is_504(served: ServedTeam, body: dict[str, Any]) -> None:
    router = serve.TeamRouter(replace(served, limits=ServeLimits(timeout_s=0.001)))
    status, payload = post(router, body)
    assert (status, payload["field"]) == (504, "request")


HOSTILE_PLANS = [
    {"sources": {"../../evil": "a,b\n1,2\n"}, "target_example": "a\n1\n"},
    {"sources": {"orders": "a,b\n1,2\n"}, "target_example": "a\n1\n", "target_rows": 10**18},
    {"sources": {"orders": "a,b\n1,2\n"}, "target_example": "a\n1\n", "target_rows": 1.5},
    {"sources": {"orders": '"unterminated\n1,2\n'}, "target_example": "a\n1\n"},
    {"sources": {"orders": "\x00\x01\x02"}, "target_example": "a\n1\n"},
    {"sources": {"orders": ["a,b", "1,2"]}, "target_example": "a\n1\n"},
    {"sources": "orders.csv", "target_example": "a\n1\n"},
    {"sources": {f"t{i}": "a\n1\n" for i in range(100)}, "target_example": "a\n1\n"},
    {"sources": {"t" * 100_000: "a\n1\n"}, "target_example": "a\n1\n"},
]


def test_hostile_plans_are_4xx_write_nothing_and_the_router_keeps_planning(
    served: ServedTeam, body: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    router = serve.TeamRouter(served)
    for request in HOSTILE_PLANS:
        status, payload = post(router, request)
        assert 400 <= status < 500 or (status == 200 and payload["ok"] is False), (request, status, payload)
        assert len(json.dumps(payload)) < 20_000  # nothing echoed back at length
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "evil").exists()
    status, answer = post(router, body)
    assert (status, answer["ok"]) == (200, True)
