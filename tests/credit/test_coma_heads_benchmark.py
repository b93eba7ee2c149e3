"""The COMA-heads probe's return-to-go and its command line (no training: no env, no Ray)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
import torch
from credit_helpers import load_benchmark, unload_benchmark

from orchestrl.algorithms.joint_columns import TEAM_REWARD


@pytest.fixture(scope="module")
def heads() -> Iterator[ModuleType]:
    module = load_benchmark("coma_heads")
    yield module
    unload_benchmark(module)


def test_return_to_go_is_the_discounted_team_return_per_real_row(heads: ModuleType) -> None:
    # one agent's 2-round episode (+ its artificial step), then another agent's 1-row chunk that
    # was cut (not terminated: its return-to-go is what it saw, no bootstrap)
    batch = {
        TEAM_REWARD: torch.tensor([0.5, 1.0, 9.0, 2.0, 9.0]),
        "loss_mask": torch.tensor([1, 1, 0, 1, 0]),
        "terminateds": torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0]),
    }
    np.testing.assert_allclose(heads.returns_to_go(batch, 0.9), [0.5 + 0.9 * 1.0, 1.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize("argv", [["--steps", "10"], ["--fit-steps", "50"], ["--level", "1"]])
def test_bad_arguments_exit_2(heads: ModuleType, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        heads.main(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err
