"""Fixtures for the ``orchestrl plan`` tests: level-1 LEMON teams made in-process
(``deploy_helpers``). The session's trained run folders (``runs``) are in tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_helpers import orchestration_team


@pytest.fixture(scope="session")
def plan_teams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Level-1 LEMON team checkpoints for ``plan``: ``warm`` (the solver cloned in) and ``untrained``."""
    run_dir = tmp_path_factory.mktemp("plan") / "runs"
    return {
        "warm": orchestration_team(run_dir, warm_start=True),
        "untrained": orchestration_team(run_dir, warm_start=False),
    }
