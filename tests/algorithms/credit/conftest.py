"""Fixtures for the credit tests: trainers of the credit estimators (helpers live in
tests/helpers/credit_helpers.py; the one-torch-thread fixture in tests/algorithms/conftest.py)."""

from __future__ import annotations

import pytest
from credit_helpers import ONE_AGENT_MATTERS, tiny, trainer

from orchestrl.training.inprocess import InProcessTrainer


@pytest.fixture(scope="module")
def lemon_matrix() -> InProcessTrainer:
    t = trainer(tiny("lemon", kwargs={"payoff": ONE_AGENT_MATTERS}))
    yield t
    t.stop()


@pytest.fixture(scope="module")
def coma_spread() -> InProcessTrainer:
    t = trainer(tiny("coma", "simple_spread", kwargs={"N": 3, "max_cycles": 8}))
    yield t
    t.stop()
