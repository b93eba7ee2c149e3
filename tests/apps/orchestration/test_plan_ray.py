"""`POST /plan` over real HTTP on 127.0.0.1: a level-1 LEMON team deployed on Ray Serve (a real
local Ray) plans for several users' tables at once and names a bad field with a 4xx."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from orchestrl.deploy import serve
from orchestrl.deploy.endpoints import ServedTeam
from orchestrl.deploy.limits import ServeLimits
from orchestrl.deploy.team import find_team
from orchestrl.envs.orchestration.tasks import generate_task

pytestmark = pytest.mark.ray


def call(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_plan_over_http_concurrently(ray_local: Path, plan_teams: dict[str, Path]) -> None:
    team = find_team(str(plan_teams["warm"]))
    policy = team.policy(team.rllib_config("train"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The four requests queue on the one /plan endpoint (it answers one at a time) and each one's
    # time limit runs from its arrival: the limit is raised so that the last one's is not spent
    # waiting for the other three's searches on a loaded 2-core machine.
    limits = ServeLimits(timeout_s=240.0)
    served = ServedTeam(policy, str(team.checkpoint), "orchestration", team.config.to_dict(), limits=limits)
    url = serve.start(served, host="127.0.0.1", port=port)
    try:
        # Held-out level-1 tasks (each is planned twice here): the team's own spec solves 9, 10 and
        # 12; on 11 it fails and the synthesiser, quick on this one, steps in.
        tasks = [generate_task(1, "heldout", seed) for seed in (9, 10, 12, 11)]
        bodies = [
            {
                "sources": {n: f.to_csv(index=False) for n, f in t.sources.items()},
                "target_example": t.public.examples.to_csv(index=False),
            }
            for t in tasks
        ]
        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda b: call(f"{url}/plan", b), bodies))
        assert [status for status, _ in answers] == [200] * 4
        local = serve.TeamRouter(served)
        assert [answer["by"] for _, answer in answers] == ["team", "team", "team", "solver"]
        for body, (_, answer) in zip(bodies, answers, strict=True):
            assert answer["spec"]
            assert answer == local.handle("POST", "/plan", json.dumps(body).encode())[1] | {
                "solver_seconds": answer["solver_seconds"]
            }
        status, payload = call(f"{url}/plan", {"sources": {"orders": "a,b\n1,2\n"}})
        assert (status, payload["field"]) == (400, "target_example")
    finally:
        serve.stop()
