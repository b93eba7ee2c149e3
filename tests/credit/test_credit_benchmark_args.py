"""The credit benchmark's command line and its coma-vs-ippo statistic (no training: no Ray, no env)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "credit.py"


@pytest.fixture(scope="module")
def credit() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("credit_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize(
    ("argv", "culprit"),
    [
        (["--envs", "orchestration_l9"], "orchestration_l9"),
        (["--quick", "--envs", "orchestration_l3"], "orchestration_l3"),  # level 3 has no quick version
        (["--algos", "qmix"], "qmix"),
    ],
)
def test_unknown_env_or_algorithm_exits_naming_it(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], culprit: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        credit.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert culprit in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_improvement_over_ippo_is_the_share_of_run_pairs_won(credit: ModuleType) -> None:
    finals = {
        "ippo": [0.2, 0.4, 0.6],
        "coma": [0.2, 0.4, 0.6],  # the same finals: as many wins as losses, 0.5
        "lemon": [0.7, 0.8, 0.9],  # above every ippo run
    }
    out = credit.improvement_over(finals, "ippo")
    assert set(out) == {"coma", "lemon"}
    assert out["coma"][0] == pytest.approx(0.5)
    assert out["coma"][1] < 0.5 < out["coma"][2]  # cannot tell them apart
    assert out["lemon"] == pytest.approx([1.0, 1.0, 1.0])
