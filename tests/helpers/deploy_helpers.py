"""Small trained teams for the tests that use one (tests/deploy, tests/apps/orchestration,
tests/experiment, tests/tracking), made in-process (no Ray).

A run folder laid out as ``orchestrl train`` lays it out (``config.yaml`` and
``checkpoints/iter_000001/learner_group/learner/rl_module``), its modules written by RLlib's own
``save_to_path`` from an in-process learner. (A module of its own name: every test folder has a
``conftest``, and ``from conftest import`` finds whichever was imported last.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import RL_MODULE_DIR
from orchestrl.training.inprocess import InProcessTrainer

RUN_ID = "0" * 32


def tiny(algo: str, env: str = "simple_spread", **sections: Any) -> dict[str, Any]:
    """A few-hundred-step experiment of ``algo`` (simple_spread: 2 agents, 5 steps)."""
    kwargs = {"N": 2, "max_cycles": 5} if env == "simple_spread" else {}
    data: dict[str, Any] = {
        "name": f"tiny_{algo}",
        "seed": 1,
        "env": {"name": env, "kwargs": kwargs},
        "algorithm": {"name": algo},
        "model": {"hidden": [16]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 1},
        "training": {"train_batch_size": 40, "minibatch_size": 40, "num_epochs": 1},
    }
    if algo == "neuromas":
        data["algorithm"].update(layers=[1], embed_dim=8, heads=1)
    for key, value in sections.items():
        data[key] = {**data.get(key, {}), **value}
    return data


def write_run(run_dir: Path, data: dict[str, Any], trainer: InProcessTrainer | None = None) -> Path:
    """A run folder of ``data`` under ``run_dir`` holding the modules of ``trainer`` (a fresh one when
    None); returns its checkpoint."""
    cfg = validate_config({**data, "run_dir": str(run_dir)})
    own = trainer is None
    trainer = trainer or InProcessTrainer(build_ppo_config(cfg))
    try:
        folder = run_dir.resolve() / "experiments" / cfg.name / RUN_ID
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.yaml").write_text(cfg.to_yaml())
        checkpoint = folder / "checkpoints" / "iter_000001"
        trainer.learner.module.save_to_path(str(checkpoint / RL_MODULE_DIR))
    finally:
        if own:
            trainer.stop()
    return checkpoint


def orchestration_team(run_dir: Path, warm_start: bool) -> Path:
    """The checkpoint of a level-1 LEMON team: the solver cloned into it on 60 training tasks
    (``warm_start``), or as initialised."""
    data = tiny("ippo", "orchestration")
    data["name"] = "plan_team" if warm_start else "plan_untrained"
    data["env"]["kwargs"] = {"level": 1, "rounds": 2, "task_pool": 100}
    data["algorithm"]["share_policy"] = True
    data["model"] = {"hidden": [128, 128]}
    if warm_start:
        data["warm_start"] = {"episodes": 60, "epochs": 40, "batch_size": 64}
    trainer = InProcessTrainer(build_ppo_config(validate_config({**data, "run_dir": str(run_dir)})))
    try:
        return write_run(run_dir, data, trainer)
    finally:
        trainer.stop()


def write_public_inputs(task: Any, folder: Path) -> tuple[list[str], Path]:
    """A task's public inputs as the CSV files a user would bring: ``--source NAME=FILE`` args
    (the fact table first) and the target example's file."""
    folder.mkdir(parents=True, exist_ok=True)
    args = []
    for name, frame in task.sources.items():
        frame.to_csv(folder / f"{name}.csv", index=False)
        args.append(f"{name}={folder / f'{name}.csv'}")
    task.public.examples.to_csv(folder / "target_example.csv", index=False)
    return args, folder / "target_example.csv"


def planning_team(run_dir: Path, episodes: int = 24) -> Path:
    """The checkpoint of a planning team (``orchestration_planning``): the generator's decisions
    cloned on ``episodes`` training tasks through the shared option scorer."""
    data = tiny("ippo", "orchestration_planning")
    data["name"] = "planning_team"
    data["env"]["kwargs"] = {"rounds": 2, "task_pool": 40}
    data["algorithm"]["share_policy"] = True
    data["model"] = {"hidden": [64], "candidate_features": 42}
    data["warm_start"] = {"episodes": episodes, "epochs": 20, "batch_size": 32}
    trainer = InProcessTrainer(build_ppo_config(validate_config({**data, "run_dir": str(run_dir)})))
    try:
        return write_run(run_dir, data, trainer)
    finally:
        trainer.stop()
