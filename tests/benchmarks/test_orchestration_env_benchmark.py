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


def test_a_probe_refit_without_the_columns_it_reads_loses_them_and_no_more() -> None:
    """``linear_probe_without``: dropping the column a label is read from takes the probe to chance
    on it; dropping a column of noise changes nothing."""
    import numpy as np
    from probe import linear_probe

    rng = np.random.default_rng(0)
    x = rng.normal(size=(800, 3))
    y = np.stack([x[:, 0] > 0, x[:, 1] > 0], 1).astype(int)
    probe = linear_probe(x[:600], y[:600], x[600:], y[600:], without={"first": [0], "noise": [2]})
    assert probe["linear_probe_accuracy"] > 0.95
    assert probe["linear_probe_without"]["noise"] == probe["linear_probe_accuracy"]
    assert 0.3 < probe["linear_probe_without"]["first"] < 0.7
    assert "linear_probe_without" not in linear_probe(x[:600], y[:600], x[600:], y[600:])


def test_probe_ablations_split_the_candidate_numbers_and_keep_the_slot(bench: ModuleType) -> None:
    """The three groups of candidate numbers are disjoint and together every number; the candidate
    block holds them; ``all_but_slot`` leaves exactly the agent's slot block."""
    from orchestrl.envs.orchestration.env import OrchestrationEnv

    builder = OrchestrationEnv(level=2).builder
    drop = bench.probe_ablations(builder)
    groups = [set(drop[g]) for g in ("example_agreement", "names", "data_profile")]
    assert sum(len(g) for g in groups) == len(set.union(*groups)) == len(drop["candidate_numbers"])
    assert set.union(*groups) == set(drop["candidate_numbers"]) < set(drop["candidates"])
    slot = builder.offsets()["slot"]
    assert sorted(set(range(builder.size)) - set(drop["all_but_slot"])) == list(range(slot.start, slot.stop))
