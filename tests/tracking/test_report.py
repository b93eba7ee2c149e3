"""``orchestrl report`` on a small MLflow store written by hand (no Ray): grouping, the numbers in
the tables, the files and what is logged back."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pytest
from mlflow.entities import Metric, Param, RunTag
from typer.testing import CliRunner

from orchestrl.cli import app
from orchestrl.tracking import names
from orchestrl.tracking import store as tracking
from orchestrl.tracking.report import ReportError, build_report

# final team returns per algorithm (3 seeds each); histories end at these values
FINAL = {"ippo": [-60.0, -58.0, -70.0], "mappo": [-50.0, -52.0, -49.0]}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report") / "runs"


@pytest.fixture(scope="module")
def store(run_dir: Path) -> str:
    """One MLflow store for the module (creating a SQLite store takes seconds)."""
    run_dir.mkdir()
    uri = tracking.default_tracking_uri(run_dir)
    client = tracking.client(uri)
    exp = tracking.RunStore(uri).experiment("bench", run_dir)
    now = int(time.time() * 1000)
    for algo, finals in FINAL.items():
        for seed, final in enumerate(finals):
            run = client.create_run(exp, run_name=f"{algo}-s{seed}", tags={names.TAG_KIND: "train"})
            rid = run.info.run_id
            params = {"algorithm.name": algo, "seed": str(seed), "env.name": "simple_spread", "name": "x"}
            curve = [final - 20.0, final - 10.0, final]
            metrics = [Metric("team_return_sum_mean", v, now, step) for step, v in enumerate(curve, start=1)]
            metrics += [
                Metric("agent_0/credit/share", 0.6, now, 3),
                Metric("agent_1/credit/share", 0.4, now, 3),
            ]
            client.log_batch(
                rid,
                metrics=metrics,
                params=[Param(k, v) for k, v in params.items()],
                tags=[RunTag("x", "y")],
            )
            client.set_terminated(rid)
    return uri


def test_compare_by_algorithm_gives_hand_checkable_tables(store: str, run_dir: Path) -> None:
    report = build_report("bench", tracking_uri=store, run_dir=run_dir, compare="algorithm.name", reps=500)
    assert list(report.groups) == ["algorithm.name=mappo", "algorithm.name=ippo"]  # best IQM first
    mappo, ippo = report.aggregates["algorithm.name=mappo"], report.aggregates["algorithm.name=ippo"]
    # 3 runs: trim_mean(0.25) cuts int(0.75) = 0 runs, so the IQM is the mean here
    assert mappo.iqm.value == pytest.approx(-151 / 3) and ippo.mean.value == pytest.approx(-188 / 3)
    assert ippo.iqm.low >= -70.0 and ippo.iqm.high <= -58.0
    # every mappo run beats every ippo run
    (pair, estimate), *_ = report.improvement.items()
    assert pair == ("algorithm.name=mappo", "algorithm.name=ippo") and estimate.value == 1.0
    files = {p.name for p in report.files}
    assert {"scores.csv", "aggregates.csv", "improvement.csv", "learning_curves.png", "credit.png"} <= files
    with (report.out_dir / "learning_curves.csv").open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["group"] == "algorithm.name=mappo"]
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert float(rows[-1]["mean"]) == pytest.approx(-151 / 3)
    with (report.out_dir / "credit.csv").open() as fh:
        credit = {(r["group"], r["module"]): float(r["mean_final"]) for r in csv.DictReader(fh)}
    assert credit[("algorithm.name=ippo", "agent_0")] == pytest.approx(0.6)
    assert "| algorithm.name=mappo | 3 | -50.33 [" in report.markdown
    # an experiment target gets its own report run, which later reports leave out
    client = tracking.client(store)
    logged = client.get_run(report.log_run_id)
    assert logged.data.tags[names.TAG_KIND] == "report"
    assert "report/summary.md" in {a.path for a in client.list_artifacts(report.log_run_id, "report")}
    again = build_report("bench", tracking_uri=store, run_dir=run_dir, compare="algorithm.name", reps=200)
    assert sum(len(g) for g in again.groups.values()) == 6


def test_default_grouping_uses_the_keys_that_differ(store: str, run_dir: Path) -> None:
    report = build_report("bench", tracking_uri=store, run_dir=run_dir, reps=200, log=False)
    assert set(report.groups) == {"algorithm.name=mappo", "algorithm.name=ippo"}  # seeds are not configs


def test_compare_listed_runs_by_name(store: str, run_dir: Path) -> None:
    report = build_report(
        "bench", tracking_uri=store, run_dir=run_dir, compare="mappo-s0,ippo-s2", reps=200, log=False
    )
    assert {k: [r.name for r in v] for k, v in report.groups.items()} == {
        "mappo-s0": ["mappo-s0"],
        "ippo-s2": ["ippo-s2"],
    }
    with pytest.raises(ReportError, match="'nobody' is neither a param nor a run"):
        build_report("bench", tracking_uri=store, run_dir=run_dir, compare="nobody", log=False)


def test_the_cli_prints_markdown_and_rejects_an_unknown_target(store: str, run_dir: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(
        app,
        [
            "report",
            "bench",
            "--run-dir",
            str(run_dir),
            "--compare",
            "algorithm.name",
            "--reps",
            "200",
            "--no-log",
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("# report: bench") and "Probability of improvement" in ok.stdout
    bad = runner.invoke(app, ["report", "nothing", "--run-dir", str(run_dir)])
    assert bad.exit_code == 2
    assert (
        bad.stderr.strip()
        == "error: 'nothing' is neither a run id nor an experiment name in the tracking store"
    )
