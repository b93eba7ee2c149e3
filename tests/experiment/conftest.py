"""Fixtures for the experiment tests: run folders of teams made in-process (``deploy_helpers``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from deploy_helpers import write_run


@pytest.fixture
def make_run(run_dir: Path) -> Callable[..., Path]:
    """``make_run(data, trainer=None)`` -> the checkpoint of a run folder (see :func:`write_run`)."""
    return lambda data, trainer=None: write_run(run_dir, data, trainer)
