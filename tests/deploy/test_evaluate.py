"""`orchestrl evaluate` in-process (no Ray): the metrics table with CIs, the evaluation run nested
under the training run in a real MLflow store, and a one-line exit-2 error for each bad target."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.tracking import names
from orchestrl.tracking.store import RunStore


def run_ids(store: RunStore, run_dir: Path, experiment: str) -> set[str]:
    return {r.run_id for r in store.find_runs(store.experiment(experiment, run_dir), {})}


def evaluate(*args: str) -> object:
    return CliRunner().invoke(app, ["evaluate", *args])


def test_evaluate_prints_cis_and_nests_its_run_under_the_training_run(runs: dict) -> None:
    (checkpoint, parent), run_dir, store = runs["spread"], runs["run_dir"], runs["store"]
    before = run_ids(store, run_dir, "tiny_ippo")
    result = evaluate(str(checkpoint), "--episodes", "4", "--seeds", "0,1", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "seeds [0, 1] x 4 episodes" in out
    assert "episode_len      5.00 [5.00, 5.00]" in out  # simple_spread max_cycles=5
    assert f"nested under {parent}" in out

    (new,) = run_ids(store, run_dir, "tiny_ippo") - before
    evaluation = store.run(new)
    assert evaluation.tags[names.TAG_PARENT] == parent
    assert evaluation.tags[names.TAG_KIND] == names.KIND_EVALUATE
    assert evaluation.params["seeds"] == "[0, 1]"
    folder = run_dir / "experiments" / "tiny_ippo" / evaluation.run_id
    with (folder / "episodes.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8
    returns = [float(r["team_return_sum"]) for r in rows]
    assert evaluation.metrics[names.TEAM_RETURN] == pytest.approx(np.mean(returns))
    low, high = (evaluation.metrics[f"{names.TEAM_RETURN}_ci95_{end}"] for end in ("low", "high"))
    assert min(returns) <= low <= np.mean(returns) <= high <= max(returns)
    assert f"{np.mean(returns):.2f} [{low:.2f}, {high:.2f}]" in out
    assert {a.path for a in store.client.list_artifacts(evaluation.run_id)} == {
        "episodes.csv",
        "evaluation.json",
    }

    # by run id, the same team; greedy and seeded, so the same episodes
    again = evaluate(parent, "--episodes", "4", "--seeds", "0,1", "--run-dir", str(run_dir), "--no-log")
    assert again.exit_code == 0, again.output
    assert f"{np.mean(returns):.2f} [{low:.2f}, {high:.2f}]" in again.stdout
    assert "MLflow run" not in again.stdout


def test_evaluate_on_another_env_config_with_set(runs: dict) -> None:
    checkpoint, _ = runs["spread"]
    result = evaluate(str(checkpoint), "--episodes", "2", "--set", "env.kwargs.max_cycles=3", "--no-log")
    assert result.exit_code == 0, result.output
    assert "episode_len      3.00 [3.00, 3.00]" in result.stdout


BAD = {
    "unknown_run": (lambda ckpt, run_dir: ["0123456789abcdef0123456789abcdef", "--run-dir", str(run_dir)]),
    "no_store": (lambda ckpt, run_dir: ["0123456789abcdef0123456789abcdef", "--run-dir", str(run_dir / "x")]),
    "not_a_checkpoint": (lambda ckpt, run_dir: [str(ckpt.parent)]),
    "no_such_path": (lambda ckpt, run_dir: [str(ckpt / "nope")]),
    "env_rejects_kwargs": (lambda ckpt, run_dir: [str(ckpt), "--set", "env.kwargs.base_action=7"]),
    "unknown_env": (lambda ckpt, run_dir: [str(ckpt), "--set", "env.name=nowhere"]),
    "other_spaces": (lambda ckpt, run_dir: [str(ckpt), "--set", "env.kwargs.payoff=[[1,2],[3,4]]"]),
    "bad_seeds": (lambda ckpt, run_dir: [str(ckpt), "--seeds", "one"]),
    "bad_split": (lambda ckpt, run_dir: [str(ckpt), "--split", "test"]),
}
EXPECTED = {
    "unknown_run": "error: run 0123456789abcdef0123456789abcdef: no such run in the tracking store (sqlite:",
    "no_store": "error: run 0123456789abcdef0123456789abcdef: no tracking store at ",
    "not_a_checkpoint": "not a checkpoint (no learner_group/learner/rl_module inside)",
    "no_such_path": "nope: neither a checkpoint folder nor a run id",
    "env_rejects_kwargs": "cannot rebuild its env 'matrix_game' with kwargs {'base_action': 7}: "
    "ValueError: base_action 7 is not an action of both agents",
    "unknown_env": "config.yaml: env.name: unknown env 'nowhere'",
    "other_spaces": "module 'shared' was trained on actions Discrete(3), the env gives Discrete(2)",
    "bad_seeds": "error: --seeds one: expected integers",
    "bad_split": "error: --split: expected heldout or train, got 'test'",
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_target_is_one_line_and_exit_2(case: str, runs: dict) -> None:
    (checkpoint, _), run_dir, store = runs["matrix"], runs["run_dir"], runs["store"]
    before = run_ids(store, run_dir, "tiny_matrix")
    result = evaluate(*BAD[case](checkpoint, run_dir))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert EXPECTED[case] in lines[0]
    assert run_ids(store, run_dir, "tiny_matrix") == before  # nothing logged


def test_a_tune_trial_checkpoint_is_found_with_its_config(runs: dict, tmp_path: Path) -> None:
    """A sweep trial keeps its modules under ``checkpoint_N/algorithm`` and its YAML in
    ``<trial>/orchestrl/config.yaml`` (orchestrl.tracking.trials)."""
    checkpoint, _ = runs["matrix"]
    trial = tmp_path / "trial_0001"
    shutil.copytree(checkpoint, trial / "checkpoint_000002" / "algorithm")
    (trial / "orchestrl").mkdir()
    shutil.copy(checkpoint.parent.parent / names.CONFIG_FILE, trial / "orchestrl" / names.CONFIG_FILE)
    for target in (trial / "checkpoint_000002", trial / "checkpoint_000002" / "algorithm"):
        result = evaluate(str(target), "--episodes", "2", "--no-log")
        assert result.exit_code == 0, result.output
        assert "lemon" not in result.stdout and "ippo on matrix_game" in result.stdout
