"""The per-agent credit table: parsed from learner metrics, written where `orchestrl train` logs it."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from orchestrl.algorithms.counterfactual import (
    CREDIT_TABLE,
    CreditCallbacks,
    CreditSpec,
    TeamGaeAdvantage,
    credit_shares,
    credit_stats,
    credit_table,
    train_run_path,
)

LEARNERS = {
    "shared": {
        "policy_loss": 0.1,
        "credit/agent_0_mean_abs_adv": 0.9,
        "credit/agent_0_share": 0.75,
        "credit/agent_0_base_duty_mean_delta": 1.0,
        "credit/agent_1_mean_abs_adv": 0.3,
        "credit/agent_1_share": 0.25,
        "credit/agent_1_drop_edge_mean_delta": float("nan"),  # a family not sampled this iteration
        "credit/critic_warmup": 0.0,
    },
    "__all_modules__": {"num_trainable_parameters": 10},
}


def test_credit_table_has_one_row_per_agent_with_its_stats() -> None:
    rows = credit_table(LEARNERS, ["agent_0", "agent_1"])
    assert rows == [
        {
            "module": "shared",
            "agent": "agent_0",
            "mean_abs_adv": 0.9,
            "share": 0.75,
            "base_duty_mean_delta": 1.0,
        },
        {"module": "shared", "agent": "agent_1", "mean_abs_adv": 0.3, "share": 0.25},
    ]


def fake_algorithm(run_path: Path) -> SimpleNamespace:
    spec = CreditSpec(piece=TeamGaeAdvantage, agents=("agent_0", "agent_1"))
    return SimpleNamespace(
        _storage=SimpleNamespace(storage_fs_path=str(run_path / "ray_results")),
        config=SimpleNamespace(learner_config_dict={"credit": spec}),
    )


def test_callback_writes_the_table_into_the_run_artifacts(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("name: x\n")
    assert train_run_path(fake_algorithm(tmp_path)) == tmp_path
    CreditCallbacks().on_train_result(
        algorithm=fake_algorithm(tmp_path), result={"learners": LEARNERS, "training_iteration": 4}
    )
    with (tmp_path / "artifacts" / CREDIT_TABLE).open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["agent"] for r in rows] == ["agent_0", "agent_1"]
    assert (
        rows[0]["share"] == "0.75" and rows[1]["base_duty_mean_delta"] == "" and rows[1]["iteration"] == "4"
    )


def test_outside_orchestrl_train_no_table_is_written(tmp_path: Path) -> None:
    assert train_run_path(fake_algorithm(tmp_path)) is None  # no config.yaml: not a train run
    CreditCallbacks().on_train_result(algorithm=fake_algorithm(tmp_path), result={"learners": LEARNERS})
    assert not (tmp_path / "artifacts").exists()


def test_credit_stats_and_shares_per_agent() -> None:
    adv = np.array([2.0, -2.0, 0.5, 9.0, -1.0], dtype=np.float32)
    agent = np.array([0, 0, 1, 1, 1])
    mask = np.array([True, True, True, False, True])  # row 3 is an artificial bootstrap step
    stats = credit_stats(adv, agent, mask, ["a", "b"])
    assert stats == {
        "credit/a_mean_adv": 0.0,
        "credit/a_mean_abs_adv": 2.0,
        "credit/b_mean_adv": -0.25,
        "credit/b_mean_abs_adv": 0.75,
    }
    # shares are taken over all agents, whichever module each agent's rows went to
    assert credit_shares({"a": 2.0, "b": 0.75, "c": 1.25}) == {"a": 0.5, "b": 0.1875, "c": 0.3125}
    assert credit_shares({"a": 0.0, "b": 0.0}) == {"a": 0.5, "b": 0.5}
