"""The typed experiment config: overrides, validation, and one-line errors naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from orchestrl.experiment.config import ConfigError, load_config, parse_overrides

BASE = {
    "name": "t",
    "env": {"name": "simple_spread", "kwargs": {"N": 3}},
    "algorithm": {"name": "mappo"},
}


def write(tmp_path: Path, data: dict, name: str = "exp.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def error_of(path: Path, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as err:
        load_config(path, overrides or [])
    return str(err.value)


def test_every_shipped_config_validates() -> None:
    configs = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
    assert configs, "configs/ holds no experiment"
    for path in configs:
        cfg = load_config(path)
        assert cfg.name


def test_overrides_are_typed_and_dotted(tmp_path: Path) -> None:
    cfg = load_config(
        write(tmp_path, BASE), ["training.lr=1e-3", "env.kwargs.N=4", "algorithm.share_policy=false"]
    )
    assert cfg.training.lr == pytest.approx(1e-3)
    assert cfg.env.kwargs["N"] == 4
    assert cfg.algorithm.knobs() == {"share_policy": False}


def test_algorithm_knobs_are_validated_once_and_kept(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, BASE), ["algorithm.share_policy=false"])
    knobs = cfg.algorithm.typed_knobs()
    assert knobs is cfg.algorithm.typed_knobs()
    assert knobs.share_policy is False
    with pytest.raises(ValidationError):  # the section is frozen: the kept knobs cannot go stale
        cfg.algorithm.share_policy = True


def test_unknown_key_names_the_file_and_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "training": {"lr": 1e-3, "learning_rate": 1}})
    assert error_of(path) == f"{path}: training.learning_rate: unknown key"


def test_wrong_type_names_the_key_and_the_value(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "training": {"num_epochs": "many"}})
    msg = error_of(path)
    assert msg.startswith(f"{path}: training.num_epochs: ")
    assert "'many'" in msg


def test_unknown_env_lists_the_registered_ones(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "env": {"name": "simple_spreed"}})
    msg = error_of(path)
    assert msg.startswith(f"{path}: env.name: unknown env 'simple_spreed' (registered: ")
    assert "simple_spread" in msg


def test_unknown_env_kwarg_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "env": {"name": "simple_spread", "kwargs": {"n_agents": 3}}})
    assert error_of(path).startswith(f"{path}: env.kwargs: env 'simple_spread' takes no kwarg 'n_agents'")


def test_unknown_algorithm_and_unknown_algorithm_knob(tmp_path: Path) -> None:
    path = write(tmp_path, {**BASE, "algorithm": {"name": "qmix"}})
    assert error_of(path).startswith(f"{path}: algorithm.name: unknown algorithm 'qmix'")
    path = write(tmp_path, {**BASE, "algorithm": {"name": "ippo", "centralised": True}})
    assert error_of(path) == f"{path}: algorithm.centralised: unknown key"


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    assert error_of(tmp_path / "nope.yaml") == f"{tmp_path / 'nope.yaml'}: no such config file"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert error_of(bad).startswith(f"{bad}: line")


def test_override_without_equals_is_rejected() -> None:
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["training.lr"])


def test_resolved_config_round_trips_through_yaml(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, BASE), ["algorithm.share_policy=false"])
    again = load_config(write(tmp_path, yaml.safe_load(cfg.to_yaml()), "again.yaml"))
    assert again.to_dict() == cfg.to_dict()
    assert cfg.flat_params()["algorithm.share_policy"] == "False"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({**BASE, "stop": {"iterations": 0}}, "stop.iterations: Input should be greater than or equal to 1"),
        ({**BASE, "env": {"name": "nope"}}, "env.name: unknown env 'nope'"),
    ],
)
def test_cli_exits_2_with_one_line_and_starts_nothing(tmp_path: Path, data: dict, expected: str) -> None:
    path = write(tmp_path, data)
    runs = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrl.cli", "train", str(path), "--run-dir", str(runs)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {path}: {expected}")
    assert "Traceback" not in proc.stderr
    assert not runs.exists()


def test_the_cli_starts_without_importing_torch_or_rllib() -> None:
    """``orchestrl --help``, and a config whose env or shared sections are wrong, answer in about a
    second: torch and RLlib (about 5 s to import on 2 cores) load only with an algorithm's knobs or
    once there is something to run."""
    heavy = "('torch', 'ray.rllib', 'ray.tune')"
    probe = f"import sys, orchestrl.cli; print([m for m in {heavy} if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
