"""Fixtures for the NeuroMAS tests: one Text2SQL bank per session, small experiment configs (built by
``neuromas_helpers``, which test modules import: ``from conftest import`` can find another folder's
conftest when several test folders run together)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from neuromas_helpers import small_experiment


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Tiny tensors on a shared 2-core machine: intra-op threads only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def t2s_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("neuromas_text2sql")


@pytest.fixture
def experiment(t2s_data_dir: Path) -> Any:
    """``experiment(env, warm_start={...}, **algorithm_knobs)`` -> a small neuromas experiment dict."""
    return lambda env, **algorithm: small_experiment(env, t2s_data_dir, **algorithm)
