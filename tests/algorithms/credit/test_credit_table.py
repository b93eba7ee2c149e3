"""The per-agent credit table: parsed from learner metrics, put into the iteration's result, written
by the tracking layer where `orchestrl train` logs it."""

from __future__ import annotations

import csv
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from orchestrl.algorithms.callbacks import CREDIT_TABLE_KEY
from orchestrl.algorithms.credit.advantage import TeamGaeAdvantage, credit_shares, credit_stats
from orchestrl.algorithms.credit.learner import CreditSpec
from orchestrl.algorithms.credit.table import CreditTableCallbacks, credit_table
from orchestrl.tracking.metrics import write_credit_table

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


def fake_algorithm() -> SimpleNamespace:
    spec = CreditSpec(piece=TeamGaeAdvantage, agents=("agent_0", "agent_1"))
    return SimpleNamespace(config=SimpleNamespace(learner_config_dict={"credit": spec}))


def test_callback_puts_the_table_into_the_result_and_tracking_writes_it(tmp_path: Path) -> None:
    result = {"learners": LEARNERS, "training_iteration": 4}
    CreditTableCallbacks().on_train_result(algorithm=fake_algorithm(), result=result)
    path = write_credit_table(result[CREDIT_TABLE_KEY], tmp_path / "artifacts" / "credit_table.csv")
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["agent"] for r in rows] == ["agent_0", "agent_1"]
    assert (
        rows[0]["share"] == "0.75" and rows[1]["base_duty_mean_delta"] == "" and rows[1]["iteration"] == "4"
    )


def test_no_credit_statistics_means_no_table_in_the_result() -> None:
    result = {"learners": {"shared": {"policy_loss": 0.1}}}
    CreditTableCallbacks().on_train_result(algorithm=fake_algorithm(), result=result)
    assert CREDIT_TABLE_KEY not in result


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
