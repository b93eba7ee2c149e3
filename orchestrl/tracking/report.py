"""``orchestrl report``: a finished experiment as the tables and plots a paper needs.

The runs come from MLflow. The target is a parent run (a sweep or a curriculum: its child runs),
a single run, or an experiment name (its runs, parents and earlier reports left out). They are
grouped:

- by default, by the experiment keys whose values differ between the runs (``seed`` and ``name``
  aside), so repeated seeds of one config form one group; a curriculum's stages by stage;
- ``--compare algorithm.name`` (or several keys, comma-separated) groups by those params;
- ``--compare RUN,RUN,...`` makes each listed run id or run name its own group (a run name
  shared by several runs, e.g. seeds, is one group).

Groups are listed best IQM first (``mode="min"`` for metrics where lower is better; P(X > Y) then
reads as "X scores higher"). P(X > Y) is given for every pair when there are at most five
groups, else for the best group against each other one.

A run's score is the mean of the last ``--last`` logged values of ``--metric``. Tasks are the
values of ``--task`` (default ``env.name``). Each group's ``(runs, tasks)`` scores give the IQM
and the mean with 95% stratified bootstrap intervals, and each pair of groups gives
P(X > Y) (:mod:`orchestrl.tracking.stats`, as rliable computes them). Learning curves with their
IQM and confidence band over runs go to a PNG and a CSV, and so does the per-agent credit plot
when ``<module>/credit/<name>`` metrics exist. Everything lands in ``<run_dir>/reports/<label>/``
and is logged under ``report/`` on the parent run. An experiment target gets a run of its own,
kind ``report``. The markdown summary is returned for the terminal.
"""

from __future__ import annotations

import csv
import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from orchestrl.tracking import names, stats
from orchestrl.tracking.store import client as mlflow_client

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

IGNORED_PARAMS = {"name", "seed", "run_dir"}
CREDIT = re.compile(r"^(?P<module>[^/]+)/credit/(?P<name>.+)$")
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")


class ReportError(RuntimeError):
    """Nothing to report on (unknown target, no runs with the metric)."""


@dataclass
class RunData:
    run_id: str
    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    history: dict[str, dict[int, float]] = field(default_factory=dict)


@dataclass
class Target:
    label: str
    experiment_id: str
    log_run_id: str | None
    """Where the report's artifacts go (the parent run; None: create a report run)."""
    runs: list[RunData]


@dataclass
class Report:
    label: str
    metric: str
    out_dir: Path
    markdown: str
    groups: dict[str, list[RunData]]
    aggregates: dict[str, stats.Aggregate]
    improvement: dict[tuple[str, str], stats.Estimate]
    files: list[Path]
    log_run_id: str | None = None


# -- selecting runs --------------------------------------------------------------------------------
def _run_data(run: Run) -> RunData:
    return RunData(
        run_id=run.info.run_id,
        name=run.info.run_name or run.info.run_id,
        params=dict(run.data.params),
        metrics=dict(run.data.metrics),
        tags=dict(run.data.tags),
    )


def _children(client: MlflowClient, experiment_id: str, parent_id: str) -> list[Run]:
    return client.search_runs(
        [experiment_id],
        filter_string=f"tags.`{names.TAG_PARENT}` = '{parent_id}'",
        order_by=["attributes.start_time ASC"],
    )


def resolve_target(client: MlflowClient, target: str) -> Target:
    """A parent run id (its children), a run id (itself) or an experiment name (its leaf runs)."""
    from mlflow.exceptions import MlflowException

    if _RUN_ID.match(target):
        try:
            run = client.get_run(target)
        except MlflowException:
            run = None
        if run is not None:
            exp = run.info.experiment_id
            children = _children(client, exp, target)
            runs = children or [run]
            label = f"{run.info.run_name or 'run'}-{target[:8]}"
            return Target(label, exp, target, [_run_data(r) for r in runs])
    experiment = client.get_experiment_by_name(target)
    if experiment is None:
        raise ReportError(f"'{target}' is neither a run id nor an experiment name in the tracking store")
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    parents = {r.data.tags.get(names.TAG_PARENT) for r in runs}
    leaves = [
        r
        for r in runs
        if r.info.run_id not in parents
        and r.data.tags.get(names.TAG_KIND)
        not in (names.KIND_REPORT, names.KIND_SWEEP, names.KIND_CURRICULUM)
    ]
    return Target(target, experiment.experiment_id, None, [_run_data(r) for r in leaves])


def group_runs(runs: list[RunData], compare: str | None) -> tuple[dict[str, list[RunData]], str]:
    """Groups runs (see the module doc); returns the groups and what they are grouped by."""
    items = [c.strip() for c in (compare or "").split(",") if c.strip()]
    known = {k for r in runs for k in r.params}
    if items and all(i in known for i in items):
        return _by_params(runs, items), ", ".join(items)
    if items:
        groups: dict[str, list[RunData]] = {}
        for item in items:
            members = [r for r in runs if item in (r.run_id, r.name)]
            if not members:
                raise ReportError(f"--compare: '{item}' is neither a param nor a run id/name among the runs")
            groups[item] = members
        return groups, "listed runs"
    if runs and all(names.TAG_STAGE in r.tags for r in runs):  # a curriculum: one group per stage
        groups = {}
        for r in sorted(runs, key=lambda r: int(r.tags.get(names.TAG_STAGE_INDEX, "0"))):
            groups.setdefault(
                f"{r.tags.get(names.TAG_STAGE_INDEX, '?')}:{r.tags[names.TAG_STAGE]}", []
            ).append(r)
        return groups, "curriculum stage"
    keys = sorted(
        k
        for k in known - IGNORED_PARAMS
        if not k.startswith("tracking.") and len({r.params.get(k) for r in runs}) > 1
    )
    if not keys:
        return {"all runs": list(runs)}, "nothing (one config)"
    return _by_params(runs, keys), ", ".join(keys)


def _by_params(runs: list[RunData], keys: list[str]) -> dict[str, list[RunData]]:
    """Groups by the values of ``keys``; labels use the keys' last parts (``lr=0.00069``)."""
    from orchestrl.experiment.config import short_names

    names = short_names(keys)
    groups: dict[str, list[RunData]] = {}
    for run in runs:
        label = ", ".join(f"{names[k]}={_short_value(run.params.get(k, '-'))}" for k in keys)
        groups.setdefault(label, []).append(run)
    return groups


def _short_value(value: str) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    return value if number.is_integer() or not math.isfinite(number) else f"{number:.4g}"


def improvement_pairs(aggregates: dict[str, stats.Aggregate], max_groups: int = 5) -> list[tuple[str, str]]:
    """Every pair of groups (``aggregates`` is ranked best first), or with many groups, the best
    against each other (k groups make k(k-1)/2 pairs, which stops being a table a reader can use)."""
    ranked = list(aggregates)
    if len(ranked) <= max_groups:
        return [(a, b) for i, a in enumerate(ranked) for b in ranked[i + 1 :]]
    return [(ranked[0], b) for b in ranked[1:]]


def load_history(client: MlflowClient, run: RunData, names: list[str]) -> None:
    for name in names:
        if name in run.metrics and name not in run.history:
            run.history[name] = {m.step: m.value for m in client.get_metric_history(run.run_id, name)}


def final_score(run: RunData, metric: str, last: int) -> float:
    """The mean of the last ``last`` logged values of ``metric`` (by step)."""
    series = run.history.get(metric)
    if not series:
        return run.metrics.get(metric, math.nan)
    values = [v for _, v in sorted(series.items())][-last:]
    return float(np.mean(values))


def score_matrix(
    groups: dict[str, list[RunData]], metric: str, last: int, task_key: str
) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
    """``{group: (runs, tasks)}`` scores over the tasks every group has; notes on what was cut."""
    notes = []
    per_group: dict[str, dict[str, list[float]]] = {}
    for label, runs in groups.items():
        by_task: dict[str, list[float]] = defaultdict(list)
        for run in runs:
            score = final_score(run, metric, last)
            if math.isfinite(score):
                by_task[run.params.get(task_key, "-")].append(score)
        per_group[label] = by_task
    tasks = sorted(set.intersection(*(set(t) for t in per_group.values()))) if per_group else []
    dropped = sorted({t for g in per_group.values() for t in g} - set(tasks))
    if dropped:
        notes.append(f"tasks not run by every group were left out: {', '.join(dropped)}")
    if not tasks:
        raise ReportError(f"no task ({task_key}) has '{metric}' in every group")
    matrices = {}
    for label, by_task in per_group.items():
        n = min(len(by_task[t]) for t in tasks)
        if any(len(by_task[t]) > n for t in tasks):
            notes.append(f"{label}: {n} runs per task used (tasks have unequal run counts)")
        matrices[label] = np.array([[by_task[t][i] for t in tasks] for i in range(n)], dtype=np.float64)
    return matrices, tasks, notes


# -- the report ------------------------------------------------------------------------------------
def build_report(
    target: str,
    *,
    tracking_uri: str,
    run_dir: Path,
    compare: str | None = None,
    metric: str = "team_return_sum_mean",
    mode: str = "max",
    last: int = 1,
    task_key: str = "env.name",
    reps: int = stats.DEFAULT_REPS,
    out_dir: Path | None = None,
    log: bool = True,
    seed: int = 0,
) -> Report:
    """Computes the report of ``target``, writes its files and (``log``) logs them to MLflow."""
    client = mlflow_client(tracking_uri)
    found = resolve_target(client, target)
    runs = [r for r in found.runs if metric in r.metrics]
    if not runs:
        raise ReportError(f"{target}: no run has logged '{metric}'")
    groups, grouped_by = group_runs(runs, compare)
    credit_names = sorted({k for r in runs for k in r.metrics if CREDIT.match(k)})
    for run in runs:
        load_history(client, run, [metric, *credit_names])
    scores, tasks, notes = score_matrix(groups, metric, last, task_key)
    lengths = {max(r.history[metric]) for r in runs if r.history.get(metric)}
    if len(lengths) > 1:
        notes.append(
            f"runs stopped at different iterations ({min(lengths)} to {max(lengths)}, e.g. by an "
            "early-stopping scheduler): their final scores come from unequal budgets"
        )
    aggregates = stats.aggregate_all(scores, reps=reps, seed=seed)
    sign = -1.0 if mode == "max" else 1.0
    aggregates = dict(sorted(aggregates.items(), key=lambda kv: sign * kv[1].iqm.value))
    groups = {label: groups[label] for label in aggregates}  # best first everywhere
    improvement = {
        (x, y): stats.probability_of_improvement(scores[x], scores[y], reps=reps, seed=seed)
        for x, y in improvement_pairs(aggregates)
    }
    out = out_dir or (run_dir.resolve() / "reports" / found.label)
    out.mkdir(parents=True, exist_ok=True)
    files = [
        _write_scores(out / "scores.csv", groups, metric, last, task_key),
        _write_aggregates(out / "aggregates.csv", aggregates),
    ]
    if improvement:
        files.append(_write_improvement(out / "improvement.csv", improvement))
    curves = {
        label: stats.curve_band([r.history[metric] for r in members], seed=seed)
        for label, members in groups.items()
    }
    files.append(_write_curves(out / "learning_curves.csv", curves))
    plot = _plot_curves(out / "learning_curves.png", curves, metric, found.label)
    files.append(plot)
    if credit_names:
        files += _credit(out, groups, credit_names, last)
    markdown = render_markdown(
        found.label, metric, last, grouped_by, tasks, reps, aggregates, improvement, notes, out, files
    )
    (out / "summary.md").write_text(markdown)
    files.append(out / "summary.md")
    report = Report(found.label, metric, out, markdown, groups, aggregates, improvement, files)
    if log:
        report.log_run_id = _log(client, found, out)
    return report


def _log(client: MlflowClient, found: Target, out: Path) -> str:
    run_id = found.log_run_id
    if run_id is None:
        tags = {names.TAG_KIND: names.KIND_REPORT}
        run_id = client.create_run(
            found.experiment_id, run_name=f"report-{time.strftime('%Y%m%d-%H%M%S')}", tags=tags
        ).info.run_id
        client.set_terminated(run_id, status="FINISHED")
    client.log_artifacts(run_id, str(out), artifact_path="report")
    return run_id


def _write_scores(
    path: Path, groups: dict[str, list[RunData]], metric: str, last: int, task_key: str
) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["group", "task", "run_id", "run_name", f"{metric} (last {last})"])
        for label, runs in groups.items():
            for r in runs:
                writer.writerow(
                    [label, r.params.get(task_key, "-"), r.run_id, r.name, final_score(r, metric, last)]
                )
    return path


def _write_aggregates(path: Path, aggregates: dict[str, stats.Aggregate]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["group", "runs", "tasks", "iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high"]
        )
        for label, a in aggregates.items():
            writer.writerow(
                [
                    label,
                    a.runs,
                    a.tasks,
                    a.iqm.value,
                    a.iqm.low,
                    a.iqm.high,
                    a.mean.value,
                    a.mean.low,
                    a.mean.high,
                ]
            )
    return path


def _write_improvement(path: Path, improvement: dict[tuple[str, str], stats.Estimate]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["x", "y", "p_x_better", "low", "high"])
        for (x, y), e in improvement.items():
            writer.writerow([x, y, e.value, e.low, e.high])
    return path


def _write_curves(path: Path, curves: dict[str, list[stats.CurvePoint]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["group", "step", "runs", "mean", "iqm", "iqm_low", "iqm_high"])
        for label, points in curves.items():
            for p in points:
                writer.writerow([label, p.step, p.runs, p.mean, p.iqm.value, p.iqm.low, p.iqm.high])
    return path


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_curves(path: Path, curves: dict[str, list[stats.CurvePoint]], metric: str, title: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for label, points in curves.items():
        steps = [p.step for p in points]
        ax.plot(steps, [p.iqm.value for p in points], label=label)
        ax.fill_between(steps, [p.iqm.low for p in points], [p.iqm.high for p in points], alpha=0.2)
    ax.set_xlabel("training iteration")
    ax.set_ylabel(f"{metric} (IQM over runs, 95% CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _credit(out: Path, groups: dict[str, list[RunData]], names: list[str], last: int) -> list[Path]:
    """Per-agent credit: each module's final credit value, averaged over a group's runs."""
    rows = []
    for label, runs in groups.items():
        for name in names:
            m = CREDIT.match(name)
            if m is None:
                continue
            values = [final_score(r, name, last) for r in runs if name in r.history]
            if values:
                rows.append((label, m["module"], m["name"], float(np.mean(values)), len(values)))
    csv_path = out / "credit.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["group", "module", "credit", "mean_final", "runs"])
        writer.writerows(rows)
    plt = _pyplot()
    kinds = sorted({r[2] for r in rows})
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.5), squeeze=False)
    labels = list(groups)
    for ax, kind in zip(axes[0], kinds, strict=True):
        modules = sorted({r[1] for r in rows if r[2] == kind})
        width = 0.8 / max(len(labels), 1)
        for j, label in enumerate(labels):
            vals = {r[1]: r[3] for r in rows if r[2] == kind and r[0] == label}
            ax.bar(
                np.arange(len(modules)) + j * width, [vals.get(m, 0.0) for m in modules], width, label=label
            )
        ax.set_xticks(np.arange(len(modules)) + width * (len(labels) - 1) / 2, modules, rotation=30)
        ax.set_title(f"credit/{kind}")
        ax.grid(alpha=0.3, axis="y")
    if len(labels) > 1:
        axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    png = out / "credit.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return [csv_path, png]


def render_markdown(
    label: str,
    metric: str,
    last: int,
    grouped_by: str,
    tasks: list[str],
    reps: int,
    aggregates: dict[str, stats.Aggregate],
    improvement: dict[tuple[str, str], stats.Estimate],
    notes: list[str],
    out: Path,
    files: list[Path],
) -> str:
    lines = [
        f"# report: {label}",
        "",
        f"- metric: `{metric}` (a run's score: mean of its last {last} logged value(s))",
        f"- grouped by: {grouped_by}; tasks: {', '.join(tasks)}",
        f"- intervals: 95% stratified bootstrap ({reps} resamples, runs resampled within each task)",
        *(f"- note: {n}" for n in notes),
        "",
        "| group | runs | IQM [95% CI] | mean [95% CI] |",
        "|---|---|---|---|",
    ]
    for name, a in aggregates.items():
        lines.append(f"| {name} | {a.runs} | {a.iqm.fmt()} | {a.mean.fmt()} |")
    if improvement:
        lines += ["", "Probability of improvement P(X > Y):", "", "| X | Y | P [95% CI] |", "|---|---|---|"]
        lines += [f"| {x} | {y} | {e.fmt()} |" for (x, y), e in improvement.items()]
    lines += ["", f"files in {out}:", *(f"- {p.name}" for p in files)]
    return "\n".join(lines) + "\n"
