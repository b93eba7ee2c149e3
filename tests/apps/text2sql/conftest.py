"""Fixtures for the Text2SQL app tests: one small trained team (``checkpoint``) for ``orchestrl ask``
and ``POST /ask``; a database built by hand. (The session's bank of generated databases,
``bank_dir`` and ``bank``, is in tests/conftest.py: the env tests share it.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import torch

from orchestrl.algorithms.behaviour_cloning import configured_warm_start
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.experiment.policy import RL_MODULE_DIR
from orchestrl.training.inprocess import InProcessTrainer


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory: pytest.TempPathFactory, bank_dir: Path) -> Path:
    """A small NeuroMAS-3 of the shipped kind (every node reads, the composer decides after the
    extractor) cloned from the expert on "how many ..." questions (about 20 s), in a run folder laid
    out as ``orchestrl train`` lays it out (config.yaml, checkpoints/iter_000001)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("ask_team")
    experiment = {
        "name": "ask",
        "seed": 0,
        "run_dir": str(root / "runs"),
        "env": {
            "name": "text2sql",
            "kwargs": {"data_dir": str(bank_dir), "question_kinds": ["count_all", "count_where"]},
        },
        "algorithm": {
            "name": "neuromas",
            "layers": [1, 1],
            "embed_dim": 32,
            "word_vectors": True,
            "bc_token_dropout": 0.0,
            "observe": "every",
            "sequential": True,
            "adapter_rank": 4,
        },
        "warm_start": {"episodes": 384, "epochs": 8, "batch_size": 32, "lr": 0.003},
        "model": {"hidden": [32]},
        "resources": {"env_runners": 0, "envs_per_env_runner": 1},
    }
    cfg = validate_config(experiment)
    ppo = build_ppo_config(cfg)
    trainer = InProcessTrainer(ppo)
    folder = root / "runs" / "experiments" / "ask" / ("0" * 32)
    try:
        configured_warm_start(ppo)(trainer.learner)
        folder.mkdir(parents=True)
        (folder / "config.yaml").write_text(cfg.to_yaml())
        trainer.learner.module.save_to_path(str(folder / "checkpoints" / "iter_000001" / RL_MODULE_DIR))
    finally:
        trainer.stop()
        torch.set_num_threads(threads)
    return folder / "checkpoints" / "iter_000001"


@pytest.fixture
def pets(tmp_path: Path) -> Path:
    """A database built by hand, in no schema the env knows."""
    path = tmp_path / "pets.sqlite"
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TABLE owners (id INTEGER PRIMARY KEY, full_name TEXT, town TEXT);
        CREATE TABLE pets (id INTEGER PRIMARY KEY, owner_id INTEGER REFERENCES owners(id), name TEXT,
                           species TEXT, age INTEGER, weight REAL);
        INSERT INTO owners VALUES (1, 'Ada Byron', 'Leeds'), (2, 'Alan Turing', 'Wilmslow');
        INSERT INTO pets VALUES (1, 1, 'Rex', 'Dog', 7, 31.5), (2, 1, 'Tom', 'Cat', 3, 4.2),
            (3, 2, 'Kiwi', 'Parrot', 12, 0.4), (4, 2, 'Bella', 'Dog', 2, 12.0), (5, 2, 'Milo', 'Cat', 9, 5.1);
        """
    )
    con.commit()
    con.close()
    return path
