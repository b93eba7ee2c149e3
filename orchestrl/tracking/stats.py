"""Aggregate statistics over runs, as rliable does (Agarwal et al., "Deep RL at the Edge of the
Statistical Precipice", NeurIPS 2021): interquartile mean, stratified bootstrap confidence
intervals and the probability of improvement.

Pure numpy/scipy, no Ray and no MLflow, so benchmarks can reuse it on any
``{algorithm: scores}`` dict where ``scores`` has shape ``(runs, tasks)``.

The point estimates are rliable's own functions (``rliable.metrics``). The bootstrap is written
here. On this venv ``rliable.library`` cannot be imported: it imports ``arch`` 7.2, which breaks
on pandas 3 (``deprecate_kwarg``). This module uses the same resampling scheme as rliable's
``StratifiedBootstrap``: runs are drawn with replacement separately within each task (the
stratum), and the percentile interval is taken from the bootstrap distribution. It also takes a
seed, which rliable cannot honour: rliable draws from the global ``np.random``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from rliable import metrics as rl_metrics

DEFAULT_REPS = 2000
"""Bootstrap replications. rliable suggests 50,000 for papers; 2,000 keeps the intervals' own
sampling noise small at a fraction of the cost, fast enough for every report."""


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval."""

    value: float
    low: float
    high: float

    def fmt(self, digits: int = 2) -> str:
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True)
class Aggregate:
    """IQM and mean of one algorithm's ``(runs, tasks)`` scores, each with a bootstrap CI."""

    iqm: Estimate
    mean: Estimate
    runs: int
    tasks: int


TOLERANCE = 1e-9
"""Slack of :func:`reaches`: an IQM or a success rate is a float sum (24 of 30 successes can come
out as 0.7999999999999999), so "at the threshold" allows for rounding."""


def reaches(value: float, threshold: float) -> bool:
    """``value`` is at or above ``threshold``, up to float rounding (:data:`TOLERANCE`)."""
    return value >= threshold - TOLERANCE


def as_scores(scores: np.ndarray | Sequence[float] | Sequence[Sequence[float]]) -> np.ndarray:
    """A ``(runs, tasks)`` float matrix; a 1-D sequence is taken as runs of one task."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"scores must have shape (runs, tasks), got {arr.shape}")
    return arr


def iqm(scores: np.ndarray) -> float:
    """Interquartile mean over all runs and tasks: the 25%-trimmed mean (rliable's definition,
    ``scipy.stats.trim_mean(x, 0.25)``: ``floor(n / 4)`` values cut from each end)."""
    return float(rl_metrics.aggregate_iqm(as_scores(scores)))


def mean(scores: np.ndarray) -> float:
    return float(rl_metrics.aggregate_mean(as_scores(scores)))


def _iqm_rows(samples: np.ndarray) -> np.ndarray:
    """IQM of each row of a ``(reps, n)`` matrix, vectorised, the same cut as ``trim_mean``."""
    n = samples.shape[1]
    cut = int(0.25 * n)
    ordered = np.sort(samples, axis=1)
    return ordered[:, cut : n - cut].mean(axis=1)


def stratified_resample(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` bootstrap copies of ``scores`` (shape ``(reps, runs, tasks)``): for each task,
    ``runs`` runs are drawn with replacement from that task's own runs."""
    runs, tasks = scores.shape
    idx = rng.integers(0, runs, size=(reps, runs, tasks))
    return scores[idx, np.arange(tasks)[None, None, :]]


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1.0 - confidence) / 2.0
    low, high = np.percentile(samples, [100 * tail, 100 * (1 - tail)])
    return float(low), float(high)


def aggregate(
    scores: np.ndarray,
    *,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> Aggregate:
    """IQM and mean of ``scores`` (runs x tasks), each with a stratified bootstrap percentile CI."""
    scores = as_scores(scores)
    rng = np.random.default_rng(seed)
    boot = stratified_resample(scores, reps, rng).reshape(reps, -1)
    return Aggregate(
        iqm=Estimate(iqm(scores), *percentile_interval(_iqm_rows(boot), confidence)),
        mean=Estimate(mean(scores), *percentile_interval(boot.mean(axis=1), confidence)),
        runs=scores.shape[0],
        tasks=scores.shape[1],
    )


def aggregate_all(
    score_dict: Mapping[str, np.ndarray],
    *,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Aggregate]:
    """:func:`aggregate` for each algorithm of ``score_dict``."""
    return {
        name: aggregate(scores, reps=reps, confidence=confidence, seed=seed)
        for name, scores in score_dict.items()
    }


def shared_task_bootstrap(
    outcomes: Mapping[str, np.ndarray | Sequence[Sequence[float]]],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    paired_runs: bool = False,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """The IQM over runs of each run's mean outcome, and its bootstrap copies, for algorithms
    scored on the *same* tasks (``outcomes[name]``: ``(runs, tasks)``, one column per task, e.g.
    success on each held-out task; a deterministic baseline is one run).

    Runs and tasks are crossed factors, so both are resampled (Owen, "The pigeonhole bootstrap",
    Ann. Appl. Stat. 2007): each copy draws the tasks with replacement, once for all algorithms,
    then each algorithm's runs with replacement. The interval of one algorithm so covers both which
    seeds ran and which tasks were drawn, as a baseline's interval over tasks does, and a
    difference taken copy by copy is paired on the tasks. With ``paired_runs``, algorithms with as
    many runs share each copy's draw of runs too: for runs that correspond row by row (the same
    seed, the same warm start), so a difference is paired on seeds as well. :func:`aggregate`
    resamples runs alone, for scores whose tasks are fixed."""
    arrays = {name: as_scores(x) for name, x in outcomes.items()}
    tasks = {x.shape[1] for x in arrays.values()}
    if len(tasks) != 1:
        raise ValueError(f"every algorithm must have the same tasks, got {sorted(tasks)}")
    (n_tasks,) = tasks
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, n_tasks, size=(reps, 1, n_tasks))
    shared: dict[int, np.ndarray] = {}
    values, copies = {}, {}
    for name, x in arrays.items():
        runs = rng.integers(0, x.shape[0], size=(reps, x.shape[0], 1))
        if paired_runs:
            runs = shared.setdefault(x.shape[0], runs)
        values[name] = iqm(x.mean(axis=1))
        copies[name] = _iqm_rows(x[runs, drawn].mean(axis=2))
    return values, copies


def _poi_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) of each bootstrap copy: x ``(reps, nx, tasks)``, y ``(reps, ny, tasks)``.

    Per task, the Mann-Whitney U statistic over ``nx * ny`` pairs (ties count one half),
    then averaged over tasks, as ``rliable.metrics.probability_of_improvement`` computes it.
    """
    greater = (x[:, :, None, :] > y[:, None, :, :]).mean(axis=(1, 2))
    ties = (x[:, :, None, :] == y[:, None, :, :]).mean(axis=(1, 2))
    return (greater + 0.5 * ties).mean(axis=1)


def probability_of_improvement(
    scores_x: np.ndarray,
    scores_y: np.ndarray,
    *,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """P(X > Y): the probability that a run of X beats a run of Y on a task, averaged over tasks,
    with a CI from resampling X's and Y's runs independently within each task."""
    x, y = as_scores(scores_x), as_scores(scores_y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"X and Y must have the same tasks, got {x.shape[1]} and {y.shape[1]}")
    value = float(rl_metrics.probability_of_improvement(x, y))
    rng = np.random.default_rng(seed)
    low, high = percentile_interval(
        _poi_rows(stratified_resample(x, reps, rng), stratified_resample(y, reps, rng)), confidence
    )
    return Estimate(value, low, high)


def pairwise_improvement(
    score_dict: Mapping[str, np.ndarray],
    *,
    reps: int = DEFAULT_REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[tuple[str, str], Estimate]:
    """P(X > Y) for every unordered pair of algorithms (in ``score_dict`` order)."""
    return {
        (a, b): probability_of_improvement(
            score_dict[a], score_dict[b], reps=reps, confidence=confidence, seed=seed
        )
        for a, b in itertools.combinations(score_dict, 2)
    }


@dataclass(frozen=True)
class CurvePoint:
    step: int
    runs: int
    mean: float
    iqm: Estimate


def curve_band(
    values_by_run: Sequence[Mapping[int, float]],
    *,
    reps: int = 500,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[CurvePoint]:
    """A learning curve with a confidence band: at each step, the IQM over the runs that logged
    that step, with a bootstrap CI over those runs (runs of unequal length, such as trials an
    ASHA scheduler stopped early, leave the later steps to the runs that went on)."""
    steps = sorted({s for run in values_by_run for s in run})
    rng = np.random.default_rng(seed)
    out: list[CurvePoint] = []
    for step in steps:
        vals = np.array([run[step] for run in values_by_run if step in run], dtype=np.float64)
        boot = stratified_resample(vals[:, None], reps, rng).reshape(reps, -1)
        low, high = percentile_interval(_iqm_rows(boot), confidence)
        out.append(CurvePoint(step, len(vals), float(vals.mean()), Estimate(iqm(vals), low, high)))
    return out
