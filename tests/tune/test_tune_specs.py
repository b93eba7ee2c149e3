"""Sweep and curriculum YAMLs are checked before anything starts (no Ray in this module)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from orchestrl.experiment.config import ConfigError, short_names
from orchestrl.training.weight_carry import CarryError, merge_state
from orchestrl.tune.curriculum import fill_placeholders, load_curriculum
from orchestrl.tune.progress import SweepReporter
from orchestrl.tune.sweep import load_sweep

REPO = Path(__file__).resolve().parents[2]
BASE = str(REPO / "configs" / "mappo_simple_spread.yaml")


def write(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def sweep_spec(**extra) -> dict:
    return {
        "name": "s",
        "base": BASE,
        "space": {"training.lr": {"loguniform": [1.0e-4, 1.0e-2]}},
        **extra,
    }


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"training.lr": {"loguniform": [0, 0.01]}}, "space.training.lr: loguniform bounds must be > 0"),
        (
            {"training.lr": {"uniform": [0.3, 0.1]}},
            "space.training.lr: uniform needs finite bounds with low < high",
        ),
        ({"training.lrr": {"choice": [0.1]}}, "space.training.lrr: unknown experiment key"),
        ({"env.kwargs.NN": {"choice": [3]}}, "space.env.kwargs.NN: unknown experiment key"),
        (
            {"algorithm.share_polcy": {"choice": [True]}},
            "space.algorithm.share_polcy: unknown experiment key",
        ),
        ({"training.num_epochs": {"uniform": [1, 8]}}, "use choice or grid for integer keys"),
        ({"training.gamma": {"choice": [0.9, 1.5]}}, "space.training.gamma: value 1.5 is rejected"),
        ({"training.lr": {"between": [1, 2]}}, "space.training.lr: expected one of"),
        ({"run_dir": {"choice": ["a", "b"]}}, "space.run_dir: 'run_dir' cannot be searched"),
    ],
)
def test_a_bad_search_space_names_the_file_and_key(tmp_path: Path, space: dict, message: str) -> None:
    path = write(tmp_path, sweep_spec(space=space))
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert str(err.value).startswith(f"{path}: ")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"frobnicate": 1}, "frobnicate: unknown key"),
        ({"metric": "return"}, "metric: 'return' is not a curated metric"),
        ({"scheduler": {"name": "hyperband"}}, "scheduler.name"),
        ({"num_samples": 0}, "num_samples"),
        ({"base": "nowhere.yaml"}, "base: no such experiment file 'nowhere.yaml'"),
        ({"overrides": {"training.lrr": 1}}, "overrides.training.lrr: unknown experiment key"),
        ({"trial_resources": {"env_runnerz": 0}}, "trial_resources.env_runnerz: unknown experiment key"),
        (
            {"search": {"algorithm": "optuna"}, "space": {"model.hidden": {"grid": [[32], [64]]}}},
            "space.model.hidden: grid needs search.algorithm: random",
        ),
        (
            {"scheduler": {"name": "pbt"}, "space": {"seed": {"grid": [0, 1]}}},
            "pbt needs a choice/uniform/loguniform key",
        ),
    ],
)
def test_bad_sweep_settings_are_one_line_errors(tmp_path: Path, extra: dict, message: str) -> None:
    path = write(tmp_path, sweep_spec(**extra))
    with pytest.raises(ConfigError) as err:
        load_sweep(path)
    assert message in str(err.value) and str(err.value).startswith(str(path))


def test_a_valid_sweep_resolves_its_base_next_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(Path(BASE).read_text())
    path = write(
        tmp_path,
        sweep_spec(
            base="base.yaml",
            space={
                "training.lr": {"loguniform": [1.0e-4, 1.0e-2]},
                "env.kwargs.N": {"grid": [3, 4]},
                "training.entropy_coeff": {"choice": [0.0, 0.01]},
            },
            overrides={"stop.iterations": 3},
        ),
    )
    sweep = load_sweep(path, run_dir=str(tmp_path / "runs"))
    assert sweep.base_path == tmp_path / "base.yaml"
    assert sweep.base["stop"]["iterations"] == 3
    assert sweep.base["resources"]["env_runners"] == 0  # trials sample in their own process
    assert sweep.base["run_dir"] == str((tmp_path / "runs").resolve())
    assert {k: d.kind for k, d in sweep.dims.items()} == {
        "training.lr": "loguniform",
        "env.kwargs.N": "grid",
        "training.entropy_coeff": "choice",
    }
    assert sweep.dims["env.kwargs.N"].to_tune() == {"grid_search": [3, 4]}


def test_the_cli_refuses_a_bad_space_before_starting_anything(tmp_path: Path) -> None:
    path = write(tmp_path, sweep_spec(space={"training.lr": {"loguniform": [-1, 0.01]}}))
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrl.cli", "sweep", str(path), "--run-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: {path}: space.training.lr: loguniform bounds must be > 0 (got [-1, 0.01])"
    )
    assert not runs.exists()  # no Ray session files, no MLflow store


def curriculum_spec(**extra) -> dict:
    return {
        "name": "c",
        "base": BASE,
        "overrides": {"env.kwargs": {"N": 3, "num_agent_neighbors": 2, "num_landmark_neighbors": 3}},
        "stages": [
            {"name": "n3", "promote": {"metric": "team_return_sum_mean", "threshold": -60, "iterations": 5}},
            {"name": "n4", "overrides": {"env.kwargs.N": 4}, "promote": {"iterations": 2}},
        ],
        **extra,
    }


def test_a_curriculum_stage_gets_its_overrides_and_budget(tmp_path: Path) -> None:
    cur = load_curriculum(write(tmp_path, curriculum_spec()))
    (_, c0), (_, c1) = cur.stages
    assert (c0.env.kwargs["N"], c1.env.kwargs["N"]) == (3, 4)
    assert (c0.stop.iterations, c1.stop.iterations) == (5, 2)
    assert c1.name.endswith("-n4") and cur.base["resources"]["env_runners"] == 0


@pytest.mark.parametrize(
    ("stages", "message"),
    [
        (
            [{"name": "a", "overrides": {"seed": "${previous.checkpoint}"}}],
            "stages[0] (a): '${previous.checkpoint}' in the first stage",
        ),
        (
            [{"name": "a"}, {"name": "b", "overrides": {"name": "${next.thing}"}}],
            "unknown placeholder '${next.thing}'",
        ),
        ([{"name": "a"}, {"name": "a"}], "stage names must be unique"),
        ([{"name": "a", "promote": {"metric": "team_return_sum_mean"}}], "go together"),
        (
            [{"name": "a", "promote": {"metric": "reward", "threshold": 1}}],
            "'reward' is not a curated metric",
        ),
        ([{"name": "a", "overrides": {"env.kwargs.M": 4}}], "stages[0] (a): overrides.env.kwargs.M: unknown"),
        ([{"name": "a", "carry": {"parts": "critic"}}], "carry.parts"),
    ],
)
def test_bad_curricula_are_one_line_errors(tmp_path: Path, stages: list, message: str) -> None:
    path = write(tmp_path, curriculum_spec(stages=stages))
    with pytest.raises(ConfigError) as err:
        load_curriculum(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_placeholders_reference_the_previous_stage() -> None:
    previous = {"checkpoint": "/ck/algorithm", "run_id": "abc"}
    value = {"grow_from": "${previous.checkpoint}", "tags": ["run ${previous.run_id}"], "n": 3}
    assert fill_placeholders(value, previous, "w") == {
        "grow_from": "/ck/algorithm",
        "tags": ["run abc"],
        "n": 3,
    }


def _state(obs_dim: int, state_dim: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(obs_dim + state_dim)
    return {
        "actor.0.weight": rng.normal(size=(8, obs_dim)),
        "actor.0.bias": rng.normal(size=8),
        "critic.0.weight": rng.normal(size=(8, state_dim)),
        "critic.0.bias": rng.normal(size=8),
    }


ACTOR = {"actor.0.weight", "actor.0.bias"}


def test_a_grown_critic_is_reinitialised_and_the_actor_carried() -> None:
    source, target = _state(18, 58), _state(18, 77)  # centralised critic input grows with N
    merged, reinit = merge_state("shared", target, ACTOR, source, "auto")
    assert reinit == ["critic"]
    np.testing.assert_array_equal(merged["actor.0.weight"], source["actor.0.weight"])
    np.testing.assert_array_equal(merged["critic.0.weight"], target["critic.0.weight"])
    with pytest.raises(CarryError, match="'critic' changed shape"):
        merge_state("shared", target, ACTOR, source, "all")


def test_a_critic_that_fits_is_carried_unless_actor_only() -> None:
    source, target = _state(18, 18), _state(18, 18)
    target = {k: v + 1.0 for k, v in target.items()}
    merged, reinit = merge_state("shared", target, ACTOR, source, "auto")
    assert reinit == [] and np.array_equal(merged["critic.0.bias"], source["critic.0.bias"])
    merged, reinit = merge_state("shared", target, ACTOR, source, "actor")
    assert reinit == ["critic"] and np.array_equal(merged["critic.0.bias"], target["critic.0.bias"])


def test_an_actor_whose_input_changed_cannot_transfer() -> None:
    with pytest.raises(
        CarryError, match=r"actor tensor actor.0.weight: checkpoint \(8, 18\) vs now \(8, 24\)"
    ):
        merge_state("shared", _state(24, 24), ACTOR, _state(18, 18), "auto")


def test_the_sweep_progress_fits_a_terminal() -> None:
    def trial(tid: str, status: str, lr: float, ret: float | None) -> SimpleNamespace:
        result = {"training_iteration": 3, "team_return_sum_mean": ret} if ret is not None else {}
        return SimpleNamespace(trial_id=tid, status=status, config={"training.lr": lr}, last_result=result)

    trials = [
        trial("t1", "TERMINATED", 1e-3, -60.0),
        trial("t2", "RUNNING", 3e-3, -55.5),
        trial("t3", "PENDING", 1e-4, None),
    ]
    reporter = SweepReporter("s", "team_return_sum_mean", "max", ["training.lr"], max_rows=2)
    line = reporter.status_line(trials)
    assert "1 running, 1 pending, 1 done" in line and "best team_return_sum_mean -55.5 (t2)" in line
    table = reporter.table(trials)
    assert table[0].split() == ["trial", "status", "iter", "lr", "team_return_sum_mean"]
    assert table[1].split()[:2] == ["t2", "running"] and table[-1].strip() == "... 1 more"
    assert max(len(row) for row in table) < 80
    assert short_names(["training.lr", "model.lr"]) == {"training.lr": "training.lr", "model.lr": "model.lr"}


@pytest.mark.parametrize(
    "path",
    sorted((REPO / "configs" / "sweeps").glob("*.yaml"))
    + sorted((REPO / "configs" / "curricula").glob("*.yaml")),
    ids=lambda p: p.name,
)
def test_shipped_specs_validate_and_say_how_to_run_them(path: Path) -> None:
    loader = load_sweep if path.parent.name == "sweeps" else load_curriculum
    loader(path)
    head = path.read_text().splitlines()[:12]
    assert head[0].startswith("# ") and any(line.startswith("# Run:") for line in head)
    assert any(line.startswith("# Expect:") for line in head)


def test_the_shipped_spread_curriculum_keeps_the_actor_input_fixed_as_agents_grow() -> None:
    from orchestrl.experiment.builder import probe_env

    cur = load_curriculum(REPO / "configs" / "curricula" / "mpe_spread_3to5.yaml")
    infos = [probe_env(cfg) for _, cfg in cur.stages]
    assert [len(info.agents) for info in infos] == [3, 4, 5]
    spaces = {(repr(i.observation_spaces[a]), repr(i.action_spaces[a])) for i in infos for a in i.agents}
    assert len(spaces) == 1  # one shared actor fits every stage
