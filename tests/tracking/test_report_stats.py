"""The report's statistics against values worked out by hand (no Ray, no MLflow)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from rliable import metrics as rl_metrics

from orchestrl.tracking import stats


def test_iqm_is_the_mean_of_the_middle_half() -> None:
    # 8 scores: trim 2 from each end -> mean(3, 4, 5, 6) = 4.5
    assert stats.iqm(np.arange(1, 9)) == pytest.approx(4.5)
    # runs x tasks is flattened: sorted [1, 2, 3, 4, 10, 20, 30, 40] -> mean(3, 4, 10, 20) = 9.25
    scores = np.array([[1, 10], [2, 20], [3, 30], [4, 40]])
    assert stats.iqm(scores) == pytest.approx(9.25)
    assert stats.mean(scores) == pytest.approx(110 / 8)


def test_iqm_matches_rliable_and_the_vectorised_version_matches_trim_mean() -> None:
    rng = np.random.default_rng(3)
    for runs, tasks in [(5, 1), (7, 3), (10, 4)]:
        scores = rng.normal(size=(runs, tasks))
        assert stats.iqm(scores) == pytest.approx(float(rl_metrics.aggregate_iqm(scores)))
    rows = rng.normal(size=(50, 11))
    expected = [scipy.stats.trim_mean(r, 0.25) for r in rows]
    np.testing.assert_allclose(stats._iqm_rows(rows), expected)


def test_bootstrap_interval_is_stratified_by_task() -> None:
    # Task 1 runs score 0 and 10, task 2 runs 100 and 110. Resampling runs within each task, the
    # mean of a resample ranges over 50..60 and hits 50 (and 60) with probability 1/16 > 2.5%,
    # so the 95% percentile interval is exactly [50, 60]. The IQM of a resample (middle two of
    # four) is (max of task-1 picks + min of task-2 picks) / 2: 50 w.p. 3/16, 55 w.p. 10/16,
    # 60 w.p. 3/16 -> interval [50, 60] around the point estimate 55.
    scores = np.array([[0.0, 100.0], [10.0, 110.0]])
    agg = stats.aggregate(scores, reps=4000, seed=1)
    assert (agg.mean.value, agg.mean.low, agg.mean.high) == pytest.approx((55.0, 50.0, 60.0))
    assert (agg.iqm.value, agg.iqm.low, agg.iqm.high) == pytest.approx((55.0, 50.0, 60.0))
    # Resampling the four scores as one pool instead would reach 0..110 (e.g. four task-1 picks).
    assert (agg.runs, agg.tasks) == (2, 2)


def test_two_runs_give_the_interval_between_them() -> None:
    # One task, runs 3 and 7: resample means are 3, 5, 7 with probabilities 1/4, 1/2, 1/4.
    agg = stats.aggregate([3.0, 7.0], reps=2000, seed=0)
    assert (agg.mean.value, agg.mean.low, agg.mean.high) == pytest.approx((5.0, 3.0, 7.0))


def test_identical_runs_have_a_zero_width_interval() -> None:
    agg = stats.aggregate(np.full((6, 2), 4.0), reps=500)
    assert (agg.iqm.low, agg.iqm.value, agg.iqm.high) == (4.0, 4.0, 4.0)


def test_probability_of_improvement_counts_wins_and_half_ties() -> None:
    # Pairs (x, y): 1>0; 2>0, 2=2 (half); 3>0, 3>2 -> (1 + 1 + 0.5 + 1 + 1) / 9 = 0.5
    assert stats.probability_of_improvement([1, 2, 3], [0, 2, 5]).value == pytest.approx(0.5)
    clear = stats.probability_of_improvement([3, 4], [1, 2], reps=500)
    assert (clear.value, clear.low, clear.high) == (1.0, 1.0, 1.0)
    # Averaged over tasks: X wins task 1 always and task 2 never -> 0.5.
    x, y = np.array([[3, 0], [4, 1]]), np.array([[1, 5], [2, 6]])
    assert stats.probability_of_improvement(x, y).value == pytest.approx(0.5)
    # X runs 0 and 10 against Y's single 5: resamples give 0 (both 0), 1 (both 10) or 0.5.
    spread = stats.probability_of_improvement([0, 10], [5], reps=2000, seed=2)
    assert (spread.value, spread.low, spread.high) == pytest.approx((0.5, 0.0, 1.0))


def test_probability_of_improvement_agrees_with_rliable_on_random_scores() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(6, 3)), rng.normal(0.5, size=(4, 3))
    assert stats.probability_of_improvement(x, y).value == pytest.approx(
        float(rl_metrics.probability_of_improvement(x, y))
    )
    boot = stats._poi_rows(x[None], y[None])
    assert boot[0] == pytest.approx(float(rl_metrics.probability_of_improvement(x, y)))


def test_pairwise_improvement_covers_each_pair_once_and_is_seeded() -> None:
    scores = {"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 2.0], "c": [5.0, 6.0, 7.0]}
    first = stats.pairwise_improvement(scores, reps=300, seed=5)
    assert list(first) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert first == stats.pairwise_improvement(scores, reps=300, seed=5)
    assert first[("a", "c")].value == 0.0


def test_curve_band_uses_the_runs_that_reached_each_step() -> None:
    points = stats.curve_band([{1: 1.0, 2: 2.0}, {1: 3.0}], reps=400)
    assert [(p.step, p.runs) for p in points] == [(1, 2), (2, 1)]
    assert points[0].mean == pytest.approx(2.0)
    assert (points[0].iqm.low, points[0].iqm.high) == pytest.approx((1.0, 3.0))
    assert (points[1].iqm.value, points[1].iqm.low, points[1].iqm.high) == (2.0, 2.0, 2.0)


def test_scores_must_be_runs_by_tasks() -> None:
    with pytest.raises(ValueError, match="runs, tasks"):
        stats.aggregate(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement(np.zeros((2, 2)), np.zeros((2, 3)))


def test_a_shared_task_bootstrap_resamples_tasks_even_where_every_seed_agrees() -> None:
    # Three seeds that solve the same 2 of 4 tasks: resampling seeds alone gives [0.5, 0.5]; drawing
    # the 4 tasks too, a copy solves 0..4 of its 4 draws, each end with probability 1/16 > 2.5%.
    team = np.array([[1.0, 1.0, 0.0, 0.0]] * 3)
    values, copies = stats.shared_task_bootstrap({"team": team, "search": team[:1]}, reps=4000, seed=2)
    assert values == {"team": 0.5, "search": 0.5}
    assert stats.percentile_interval(copies["team"], 0.95) == (0.0, 1.0)
    agg = stats.aggregate(team.mean(axis=1), reps=500)
    assert (agg.iqm.low, agg.iqm.high) == (0.5, 0.5)
    # one draw of tasks for all: two algorithms with the same outcomes differ by 0 in every copy
    np.testing.assert_array_equal(copies["team"], copies["search"])


def test_a_shared_task_bootstrap_pairs_runs_only_when_asked() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random((5, 30)) < 0.5).astype(float)
    _, apart = stats.shared_task_bootstrap({"a": a, "b": a.copy()}, reps=200)
    _, paired = stats.shared_task_bootstrap({"a": a, "b": a.copy()}, reps=200, paired_runs=True)
    assert np.all(paired["a"] == paired["b"])  # the same seeds and tasks in every copy
    assert np.any(apart["a"] != apart["b"])  # seeds drawn apart: the copies differ
    with pytest.raises(ValueError, match="same tasks"):
        stats.shared_task_bootstrap({"a": a, "b": a[:, :29]})
