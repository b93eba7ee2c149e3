"""The env-calibration benchmark's ``--update``: a full run split over invocations keeps the levels
an earlier run with the same settings wrote, and refuses, naming the file, one it cannot extend."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from credit_helpers import load_benchmark, unload_benchmark


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    module = load_benchmark("orchestration_env")
    yield module
    unload_benchmark(module)


def quick_settings(bench: ModuleType) -> dict:
    return {**bench.QUICK, "quick": True}


def test_update_keeps_the_levels_an_earlier_run_with_the_same_settings_wrote(
    bench: ModuleType, tmp_path: Path
) -> None:
    out = tmp_path / "env.json"
    out.write_text(json.dumps({"levels": {"4": {"solver_success": 0.5}}, "settings": quick_settings(bench)}))
    assert bench.kept_levels(out, quick_settings(bench), pytest.fail) == {"4": {"solver_success": 0.5}}
    assert bench.kept_levels(tmp_path / "none.json", quick_settings(bench), pytest.fail) == {}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"levels": {"4": {}}, "settings": {"train_tasks": 2000}}', "other settings"),
        ("not json", "is not this benchmark's output"),
        ('{"settings": {}}', "is not this benchmark's output"),
    ],
)
def test_update_refuses_a_file_it_cannot_extend_naming_it_before_anything_runs(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    out = tmp_path / "env.json"
    out.write_text(text)
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--quick", "--levels", "1", "--update", "--out", str(out)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert str(out) in err and says in err
    assert out.read_text() == text
