"""``orchestrl sweep`` on a real local Ray: a 2-trial sweep, stopped mid-way and resumed, checked
through MLflow; then ``orchestrl report`` on it."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from ray.tune import Callback

from orchestrl.tracking import names
from orchestrl.tracking import store as tracking
from orchestrl.tracking.report import build_report
from orchestrl.tune.lifecycle import Launch
from orchestrl.tune.sweep import SweepSummary, load_sweep, run_sweep

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]


class InterruptOnce(Callback):
    """Sends Tune the signal Ctrl-C would (SIGUSR1 is caught the same way) when the second
    trial reports its second iteration: the first trial is done, the second has a checkpoint
    of iteration 1 and is in the middle of iteration 2's bookkeeping."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker  # a file, not a flag: Tune pickles callbacks and restores them on resume

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
        if (
            trial.trial_id.endswith("_00001")
            and result["training_iteration"] == 2
            and not self.marker.exists()
        ):
            self.marker.touch()
            os.kill(os.getpid(), signal.SIGUSR1)


@pytest.fixture(scope="module")
def resumed_sweep(ray_local: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sweep")
    spec = {
        "name": "it_sweep",
        "base": str(REPO / "configs" / "mappo_simple_spread.yaml"),
        "overrides": {
            "env.kwargs": {"N": 3, "max_cycles": 10},
            "model.hidden": [32],
            "training.train_batch_size": 200,
            "training.minibatch_size": 100,
            "training.num_epochs": 1,
            "stop.iterations": 3,
        },
        "space": {"training.lr": {"grid": [0.001, 0.003]}},
        "trial_resources": {"env_runners": 0, "envs_per_env_runner": 2},
        "max_concurrent": 1,
    }
    path = root / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    sweep = load_sweep(path, run_dir=str(root / "runs"))
    lines: list[str] = []
    first = run_sweep(sweep, Launch(echo=lines.append), callbacks=(InterruptOnce(root / "interrupted"),))
    client = tracking.client(first.tracking_uri)
    before = {
        r.data.tags[names.TAG_TRIAL]: r
        for r in client.search_runs(
            [client.get_experiment_by_name("it_sweep").experiment_id],
            filter_string=f"tags.`{names.TAG_PARENT}` = '{first.parent_run_id}'",
        )
    }
    parent_status = client.get_run(first.parent_run_id).info.status
    second = run_sweep(load_sweep(path, run_dir=str(root / "runs")), Launch(resume=True, echo=lines.append))
    return {
        "first": first,
        "second": second,
        "before": before,
        "parent_status_before": parent_status,
        "client": client,
        "root": root,
    }


def children(client: Any, summary: SweepSummary) -> dict[str, Any]:
    exp = client.get_experiment_by_name(summary.experiment).experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`{names.TAG_PARENT}` = '{summary.parent_run_id}'")
    return {r.data.tags[names.TAG_TRIAL]: r for r in runs}


def test_an_interrupted_sweep_says_so_and_keeps_its_finished_trial(resumed_sweep: dict) -> None:
    first: SweepSummary = resumed_sweep["first"]
    assert first.interrupted
    statuses = {t.trial_id[-5:]: t.status for t in first.trials}
    assert statuses == {"00000": "FINISHED", "00001": "KILLED"}
    before = resumed_sweep["before"]
    assert {tid[-5:]: r.info.status for tid, r in before.items()} == statuses
    assert resumed_sweep["parent_status_before"] == "KILLED"


def test_resume_finishes_every_trial_once_under_the_same_parent(resumed_sweep: dict) -> None:
    first, second = resumed_sweep["first"], resumed_sweep["second"]
    client = resumed_sweep["client"]
    assert second.parent_run_id == first.parent_run_id and not second.interrupted
    runs = children(client, second)
    before = resumed_sweep["before"]
    assert set(runs) == set(before)  # stable trial ids, one child run each
    assert {tid: r.info.run_id for tid, r in runs.items()} == {
        tid: r.info.run_id for tid, r in before.items()
    }
    for tid, run in runs.items():
        assert run.info.status == "FINISHED"
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "team_return_sum_mean")]
        assert steps == [1, 2, 3], (tid, steps)  # each iteration logged exactly once
    done_first = next(t for t in runs if t.endswith("_00000"))
    # The trial that had finished was not run again: its run is untouched by the resume.
    assert runs[done_first].info.end_time == before[done_first].info.end_time
    assert sorted(t.trial_id for t in second.trials) == sorted(t.trial_id for t in first.trials)
    # The interrupted trial continued from its iteration-1 checkpoint rather than starting over:
    # in Tune's own record its iteration 1 ran once, and its next result came 1 iteration after
    # a restore.
    resumed = next(t for t in runs if t.endswith("_00001"))
    trial_dir = Path(runs[resumed].data.tags[names.TAG_CHECKPOINT]).parents[1]
    rows = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows].count(1) == 1
    after_restore = [r for r in rows if r["training_iteration"] == 2 and r["iterations_since_restore"] == 1]
    assert after_restore, [(r["training_iteration"], r["iterations_since_restore"]) for r in rows]


def test_the_mlflow_tree_holds_params_metrics_artifacts_and_the_best_trial(resumed_sweep: dict) -> None:
    second: SweepSummary = resumed_sweep["second"]
    client = resumed_sweep["client"]
    parent = client.get_run(second.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["space.training.lr"] == "grid(0.001, 0.003)"
    assert parent.data.params["sweep.metric"] == "team_return_sum_mean"
    runs = children(client, second)
    for run in runs.values():
        params = run.data.params
        assert params["env.kwargs.N"] == "3" and params["training.lr"] in ("0.001", "0.003")
        assert len(params) < 60  # our experiment keys, not RLlib's 300
        assert {"team_return_sum_mean", "shared/vf_explained_var", "env_steps"} <= set(run.data.metrics)
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
        assert {"config.yaml", "learning_curve.png", "checkpoint"} <= artifacts
    best = second.best
    assert best is not None and parent.data.tags["orchestrl.best_trial"] == best.trial_id
    assert parent.data.tags["orchestrl.best_run_id"] == runs[best.trial_id].info.run_id
    assert Path(parent.data.tags[names.TAG_CHECKPOINT]).is_dir()
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "best")} == {
        "best/checkpoint",
        "best/config.yaml",
    }
    assert client.get_run(parent.info.run_id).data.metrics["trials_done"] == 2.0
    tune_dir = Path(parent.data.tags["orchestrl.tune_path"])
    assert tune_dir.is_dir() and tune_dir.is_relative_to(resumed_sweep["root"] / "runs" / "tune")


def test_report_on_the_sweep_writes_tables_plots_and_logs_them(resumed_sweep: dict) -> None:
    second: SweepSummary = resumed_sweep["second"]
    report = build_report(
        second.parent_run_id,
        tracking_uri=second.tracking_uri,
        run_dir=resumed_sweep["root"] / "runs",
        reps=300,
    )
    assert set(report.groups) == {"lr=0.001", "lr=0.003"}
    assert {p.name for p in report.files} >= {
        "scores.csv",
        "aggregates.csv",
        "improvement.csv",
        "learning_curves.csv",
        "learning_curves.png",
        "summary.md",
    }
    assert report.out_dir.is_relative_to(resumed_sweep["root"] / "runs" / "reports")
    assert "| lr=0.001 | 1 |" in report.markdown
    client = resumed_sweep["client"]
    logged = {a.path for a in client.list_artifacts(second.parent_run_id, "report")}
    assert "report/summary.md" in logged and "report/learning_curves.png" in logged
