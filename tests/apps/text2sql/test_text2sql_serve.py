"""``POST /ask`` on ``orchestrl serve``: the router without Ray (answers equal ``orchestrl ask``'s,
bad fields named with 4xx; the question's and result's limits, a runaway query stopped, hostile
asks that change nothing), ``--database`` refusals before Ray starts, and the real Ray Serve app
over HTTP on 127.0.0.1 with 8 concurrent clients (the session's shared local Ray)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from orchestrl.apps.text2sql.ask import Database, Team
from orchestrl.cli import app
from orchestrl.deploy import serve
from orchestrl.deploy.cli import parse_databases
from orchestrl.deploy.endpoints import DEADLINE, RequestError, ServedTeam
from orchestrl.deploy.limits import ServeLimits
from orchestrl.deploy.team import find_team
from orchestrl.envs.text2sql.bank import QuestionBank

QUESTIONS = [
    ("flights", "How many flights are there?"),
    ("flights", "How many airlines are there?"),
    ("flights", "Count the flights"),
    ("pets", "How many pets are there?"),
    ("pets", "How many owners are there?"),
    ("pets", "How many pets are dogs?"),
    ("pets", "How many pets live in Leeds?"),
    ("pets", "number of cats"),
]


@pytest.fixture
def served(checkpoint: Path, bank: QuestionBank, pets: Path) -> ServedTeam:
    team = find_team(str(checkpoint))
    databases = {"flights": str(bank.db_paths["flights"]), "pets": str(pets)}
    return ServedTeam(team.policy(team.rllib_config("train")), str(checkpoint), "text2sql", {}, databases)


def expected(checkpoint: Path, served: ServedTeam) -> list[dict[str, Any]]:
    """What ``orchestrl ask`` answers, in process, for each of :data:`QUESTIONS`."""
    team = Team.load(checkpoint)
    out = []
    for name, question in QUESTIONS:
        answer = team.ask(Database.open(served.databases[name]), question)
        out.append({"sql": answer.sql, "rows": [list(r) for r in answer.rows], "error": answer.error})
    return out


def post(router: serve.TeamRouter, body: Any) -> tuple[int, dict[str, Any]]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return router.handle("POST", "/ask", raw)


def test_ask_answers_as_orchestrl_ask_does(checkpoint: Path, served: ServedTeam) -> None:
    router = serve.TeamRouter(served)
    status, index = router.handle("GET", "/", b"")
    assert status == 200 and index["endpoints"] == {"/act": "POST", "/ask": "POST"}
    assert index["databases"] == ["flights", "pets"]
    answers = [post(router, {"question": q, "database": name}) for name, q in QUESTIONS]
    assert answers == [(200, e) for e in expected(checkpoint, served)]
    assert answers[0] == (200, {"sql": "SELECT COUNT(*) FROM flights", "rows": [[80]], "error": None})
    assert answers[3] == (200, {"sql": "SELECT COUNT(*) FROM pets", "rows": [[5]], "error": None})


@pytest.mark.parametrize(
    ("body", "status", "field", "message"),
    [
        ({"database": "pets"}, 400, "question", "required"),
        ({"question": 7, "database": "pets"}, 400, "question", "a non-empty string"),
        ({"question": "  ", "database": "pets"}, 400, "question", "a non-empty string"),
        ({"question": " ".join(["pets"] * 41), "database": "pets"}, 400, "question", "at most 40"),
        ({"question": "How many pets?"}, 400, "database", "required: one of ['flights', 'pets']"),
        ({"question": "How many pets?", "database": "zoo"}, 404, "database", "unknown database 'zoo'"),
    ],
    ids=["no-question", "not-a-string", "blank", "too-long", "no-database", "unknown-database"],
)
def test_a_bad_ask_gets_4xx_naming_the_field(
    served: ServedTeam, body: dict, status: int, field: str, message: str
) -> None:
    got_status, payload = post(serve.TeamRouter(served), body)
    assert (got_status, payload["field"]) == (status, field)
    assert payload["error"].startswith(f"{field}: ") and message in payload["error"], payload


def test_only_text2sql_teams_serve_ask(served: ServedTeam) -> None:
    other = ServedTeam(served.policy, served.checkpoint, "mpe")
    assert serve.TeamRouter(other).handle("POST", "/ask", b"{}")[0] == 404


def test_database_flags_are_checked_before_ray_starts(
    checkpoint: Path, pets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = tmp_path / "wide.sqlite"
    con = sqlite3.connect(wide)
    con.execute("CREATE TABLE wide (" + ", ".join(f"c{i} INTEGER" for i in range(15)) + ")")
    con.close()
    cases = [
        (["pets"], "--database pets: expected NAME=FILE.sqlite"),
        ([f"p={pets}", f"p={pets}"], "the name 'p' is given twice"),
        ([f"p={tmp_path / 'missing.sqlite'}"], "missing.sqlite: no such file"),
        ([f"w={wide}"], "15 columns: the action space holds at most 14 columns"),
    ]
    for values, message in cases:
        result = CliRunner().invoke(app, ["serve", str(checkpoint), *[f"--database={v}" for v in values]])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output
    with pytest.raises(typer.Exit):
        parse_databases([f"p={pets}"], "mpe")
    assert "(mpe) serves no endpoint that reads databases" in capsys.readouterr().err
    assert parse_databases([f"p={pets}"], "text2sql") == {"p": str(pets.resolve())}


def call(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.ray
def test_ask_over_http_concurrently_on_ray_serve(
    ray_local: Path, checkpoint: Path, served: ServedTeam
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = serve.start(served, host="127.0.0.1", port=port)
    try:
        bodies = [{"question": q, "database": name} for name, q in QUESTIONS] * 3
        with ThreadPoolExecutor(8) as pool:  # 8 clients at once
            answers = list(pool.map(lambda b: call(f"{url}/ask", b), bodies))
        assert answers == [(200, e) for e in expected(checkpoint, served)] * 3
        assert call(f"{url}/ask", {"question": "How many pets?", "database": "zoo"}) == (
            404,
            {"error": "database: unknown database 'zoo' (registered: flights, pets)", "field": "database"},
        )
        assert call(f"{url}/ask", b"{oops") == (400, {"error": "body: not valid JSON", "field": "body"})
    finally:
        serve.stop()


def test_ask_limits_each_get_their_status(served: ServedTeam, pets: Path) -> None:
    router = serve.TeamRouter(replace(served, limits=ServeLimits(question_chars=30, result_rows=2)))
    status, payload = post(router, {"question": "How many pets are there in this house?", "database": "pets"})
    assert (status, payload) == (
        413,
        {"error": "question: 38 characters; the limit is 30", "field": "question"},
    )
    assert post(router, {"question": "How many pets are there?", "database": "pets"})[0] == 200
    endpoint = router.endpoints["/ask"]
    result = endpoint.run(endpoint.databases["pets"], "SELECT name FROM pets")  # 5 rows
    assert (result.ok, result.rows, result.error) == (False, (), "result has more than 2 rows")
    assert endpoint.run(endpoint.databases["pets"], "SELECT name FROM pets LIMIT 2").rows == (
        ("Rex",),
        ("Tom",),
    )


def test_a_runaway_query_is_stopped_at_the_time_limit(served: ServedTeam) -> None:
    endpoint = serve.TeamRouter(replace(served, limits=ServeLimits(timeout_s=0.3))).endpoints["/ask"]
    forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"
    started = time.monotonic()
    with pytest.raises(RequestError) as caught:
        endpoint.run(endpoint.databases["pets"], forever)
    assert time.monotonic() - started < 2  # SQLite's progress handler interrupted it
    assert (caught.value.status, caught.value.field) == (504, "request")
    token = DEADLINE.set(time.monotonic() + 0.2)  # inside a request: the time it has left
    try:
        with pytest.raises(RequestError):
            endpoint.run(endpoint.databases["pets"], forever)
    finally:
        DEADLINE.reset(token)
    assert time.monotonic() - started < 3


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


HOSTILE_ASKS = [
    ({"question": "'; DROP TABLE pets; --", "database": "pets"}, (200, 400)),
    ({"question": "How many pets? UNION SELECT * FROM owners", "database": "pets"}, (200, 400)),
    ({"question": "x" * 5000, "database": "pets"}, (413,)),
    ({"question": ["How many pets?"], "database": "pets"}, (400,)),
    ({"question": {"$ne": ""}, "database": "pets"}, (400,)),
    ({"question": "How many pets?", "database": "../pets.sqlite"}, (404,)),
    ({"question": "How many pets?", "database": "/etc/passwd"}, (404,)),
    ({"question": "How many pets?", "database": "file:pets?mode=rwc"}, (404,)),
    ({"question": "How many pets?", "database": "../" * 10_000}, (404,)),
    ({"question": "How many pets?", "database": ["pets"]}, (400,)),
]


def test_hostile_asks_change_nothing_and_the_router_keeps_answering(served: ServedTeam, pets: Path) -> None:
    router = serve.TeamRouter(served)
    before = (digest(pets), sorted(p.name for p in pets.parent.iterdir()))
    for body, allowed in HOSTILE_ASKS:
        status, payload = post(router, body)
        assert status in allowed, (body, status, payload)
        if status == 200:  # a question is words: the team's own SELECT over the schema, run read-only
            assert payload["sql"] is None or payload["sql"].startswith("SELECT"), payload
        else:
            assert len(payload["error"]) < 300, payload  # nothing echoed back at length
    for raw in (b"{oops", b'{"question": NaN, "database": "pets"}', b"[" * 50_000):
        assert 400 <= post(router, raw)[0] < 500
    assert post(router, {"question": "How many pets are there?", "database": "pets"}) == (
        200,
        {"sql": "SELECT COUNT(*) FROM pets", "rows": [[5]], "error": None},
    )
    assert (digest(pets), sorted(p.name for p in pets.parent.iterdir())) == before
