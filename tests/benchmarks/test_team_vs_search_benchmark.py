"""The team-vs-search benchmark: its command line, a tiny run of each kind on level 1 (in-process, no
Ray), and the report rebuilt from logged runs alone."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from credit_helpers import load_benchmark, unload_benchmark

from orchestrl.envs.orchestration.solver import answer_index
from orchestrl.experiment.policy import TrainedPolicy


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    module = load_benchmark("team_vs_search")
    yield module
    unload_benchmark(module)


@pytest.mark.parametrize(
    ("argv", "culprit"),
    [
        (["--levels", "9"], "9"),
        (["--kinds", "qmix"], "qmix"),
        (["--dagger-rounds", "-1"], "--dagger-rounds: -1"),
    ],
)
def test_a_bad_level_kind_or_dagger_round_count_exits_naming_it(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], culprit: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and culprit in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_summarise_names_a_missing_log(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--summarise", str(tmp_path / "nope.log"), "--out", str(tmp_path / "out")])
    assert "nope.log" in capsys.readouterr().err and not (tmp_path / "out").exists()


def logged(
    kind: str,
    seed: int,
    rates: list[float],
    level: int = 4,
    labelled: int | None = None,
    untried: list[float] | None = None,
    libraries: dict[str, str] | None = None,
) -> str:
    tasks = 10

    def per_task(rates: list[float]) -> dict[str, list[float]]:
        return {
            str(k): [1.0] * round(r * tasks) + [0.0] * (tasks - round(r * tasks))
            for k, r in enumerate(rates, 1)
        }

    run = {
        "success_at_k": per_task(rates),
        "seconds_per_plan": 0.1,
        "training_executions": 100.0,
        "train_s": 5.0,
    }
    if kind == "solver":
        run |= {"expert_executions_per_task": 12.0}
    if kind == "bc_only":
        run |= {"expert_labelled_tasks": 30 + seed}
    if labelled is not None:
        run |= {"expert_labelled_tasks": labelled}
    if untried is not None:  # the same team when no round re-runs a plan
        run |= {"untried_success_at_k": per_task(untried), "untried_seconds_per_plan": 0.2}
    if libraries is not None:  # logged since runs record where they ran
        run |= {"environment": {"commit": "abc", "python": "3.11.9", "libraries": libraries}}
    return f"{'team-vs-search-run'} {json.dumps([level, kind, seed, run])}"


def test_the_report_is_rebuilt_from_logged_runs_with_the_solver_at_the_same_k(
    bench: ModuleType, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    solver = logged("solver", 0, [0.1, 0.2, 0.3, 0.5, 0.6, 0.8])
    teams = [logged("lemon", s, [0.5, 0.8, 0.9], labelled=0, untried=[0.5, 0.9, 1.0]) for s in range(3)]
    teams += [logged("ippo", s, [0.4, 0.4, 0.4], labelled=6, untried=[0.4, 0.5, 0.6]) for s in range(2)]
    teams += [logged("ippo", 2, [0.4, 0.4, 0.4], labelled=6)]  # logged before the untried play
    teams += [logged("bc_only", s, [0.3, 0.3, 0.3], libraries={"torch": "2.13.0"}) for s in range(3)]
    random_team = logged("random", 0, [0.0, 0.1, 0.1])
    log.write_text("\n".join(["noise", solver, random_team, *teams]) + "\n")
    report = bench.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    level = report["levels"]["4"]
    assert level["solver_success_at_k"]["3"]["mean"] == pytest.approx(0.3)
    assert level["lemon_success_at_k"]["3"]["iqm"] == pytest.approx(0.9)
    ippo = level["ippo_success_at_k"]["1"]
    assert (ippo["iqm"], ippo["ci95"], ippo["seeds"]) == (pytest.approx(0.4), pytest.approx([0.4, 0.4]), 3)
    low, high = ippo["ci95_with_tasks"]  # its seeds agree on every task; its 10 tasks are a sample
    assert low < 0.4 < high and high - low > 0.3
    differences = level["paired_differences_at_3"]
    assert differences["lemon - solver"]["difference"] == pytest.approx(0.6)
    assert 0.0 < differences["lemon - solver"]["ci95"][0] < 0.6 < differences["lemon - solver"]["ci95"][1]
    assert differences["lemon - bc_only"]["difference"] == pytest.approx(0.6)
    assert differences["lemon_untried - solver"]["difference"] == pytest.approx(0.7)
    assert "lemon_untried - bc_only_untried" not in differences  # cloning continued played greedy only
    assert level["lemon_above_solver_at_3_cis_apart"] is True
    assert level["lemon_untried_success_at_k"]["3"]["iqm"] == pytest.approx(1.0)
    assert level["lemon_untried_seconds_per_plan"] == pytest.approx(0.2)
    assert level["lemon_untried_above_solver_at_3_cis_apart"] is True
    assert "ippo_untried_success_at_k" not in level  # not every seed played it
    assert level["random_success_at_k"]["3"]["mean"] == pytest.approx(0.1)
    assert level["environments"] == {  # 3 runs said where they ran, 8 were logged before runs did
        "library_sets": [{"libraries": {"torch": "2.13.0"}, "runs": 3}],
        "unrecorded_runs": 8,
    }
    assert "random_success_at_k" not in report["levels"].get("3", {})
    # cloning continued pays a full search for each task it labels: 31 tasks a seed, 12 executions each
    assert level["bc_only_expert_labelled_tasks"] == pytest.approx(31.0)
    assert level["bc_only_expert_executions"] == pytest.approx(31.0 * 12.0)
    assert level["ippo_expert_executions"] == pytest.approx(6.0 * 12.0)
    assert "lemon_expert_labelled_tasks" not in level  # RL alone: no search labelled anything
    assert json.loads((tmp_path / "out" / "team_vs_search.json").read_text())["levels"] == report["levels"]


def test_cis_apart_compares_intervals_over_the_same_draws_of_tasks(bench: ModuleType, tmp_path: Path) -> None:
    """Three seeds at 7 of 10 tasks against a solver at 3: the seeds agree, so an interval over seeds
    alone ([0.7, 0.7]) clears the solver's over tasks; drawn over the same tasks, lemon's does not."""
    log = tmp_path / "runs.log"
    runs = [logged("solver", 0, [0.1, 0.2, 0.3, 0.5, 0.6, 0.8])]
    runs += [logged("lemon", s, [0.7, 0.7, 0.7]) for s in range(3)]
    log.write_text("\n".join(runs) + "\n")
    level = bench.main(["--summarise", str(log), "--out", str(tmp_path / "out")])["levels"]["4"]
    lemon, solver = level["lemon_success_at_k"]["3"], level["solver_success_at_k"]["3"]
    assert lemon["ci95"][0] > solver["ci95"][1] > lemon["ci95_with_tasks"][0]
    assert level["lemon_above_solver_at_3_cis_apart"] is False


def test_a_report_over_runs_that_played_different_held_out_tasks_is_refused(
    bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Intervals over the tasks need the same tasks for every kind of a level."""
    shorter = json.loads(logged("lemon", 1, [0.5, 0.5, 0.5]).split(" ", 1)[1])
    shorter[3]["success_at_k"] = {k: v[:6] for k, v in shorter[3]["success_at_k"].items()}
    log = tmp_path / "runs.log"
    log.write_text(logged("lemon", 0, [0.5, 0.5, 0.5]) + f"\nteam-vs-search-run {json.dumps(shorter)}\n")
    with pytest.raises(SystemExit):
        bench.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    assert re.search(r"runs\.log: level 4: .* \[6, 10\]", capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_cloning_continued_runs_as_long_as_its_seed_s_lemon_trained(bench: ModuleType) -> None:
    known = {(4, "lemon", 0): {"train_s": 161.5}, (4, "lemon", 1): {"train_s": 90.0}, (3, "ippo", 0): {}}
    assert bench.clone_budget(4, 0, known) == 161.5 and bench.clone_budget(4, 1, known) == 90.0
    assert bench.clone_budget(3, 0, known) is None  # no lemon run of that level and seed yet


def test_a_team_s_fresh_plans_are_those_it_has_not_run_in_the_episode(bench: ModuleType) -> None:
    """``fresh``: a plan not run yet in this episode; an invalid one only in the first round."""
    from orchestrl.algorithms.behaviour_cloning import expert_of

    env = bench.heldout_env(1, False)
    seen = []

    def act(obs, fresh):
        expert = expert_of(env)()
        idle = {a: np.zeros_like(v) for a, v in expert.items()}  # no pipeline
        seen.append((fresh(expert), fresh(idle)))
        return expert

    try:
        bench.heldout_play(act, env, dataclasses.replace(bench.QUICK, heldout_tasks=2), agreement=False)
    finally:
        env.close()
    assert seen == [(True, True), (False, False), (False, False)] * 2  # each task starts afresh


@pytest.mark.parametrize(
    ("held", "chosen"),
    [([0.5, 1.0, 1.0], 1), ([1.0, 0.2], 0), ([0.2, 0.8, 0.5], 1), ([0.0, 0.0], 0), ([0.4], 0)],
)
def test_a_team_answers_after_k_rounds_as_solver_k_answers_after_k_executions(
    held: list[float], chosen: int
) -> None:
    """The first round whose output held every example row, else the first that held the most (the
    team's answer is chosen by the function ``solver_k``'s ``answer_at`` answers by)."""
    assert answer_index(held) == chosen


def test_each_kind_runs_and_reports_success_after_every_round(bench: ModuleType, tmp_path: Path) -> None:
    """Level 1, a handful of tasks: the solver, the random team, a team after one PPO update, and
    cloning continued."""
    tiny = dataclasses.replace(
        bench.QUICK, levels=(1,), heldout_tasks=2, warm_episodes=4, warm_epochs=1, iterations=1, batch=6
    )
    solver = bench.run(tiny, 1, "solver", 0, tmp_path)
    assert solver["success_at_k"]["1"] == [1.0, 1.0] and solver["expert_executions_per_task"] >= 1
    random_team = bench.run(tiny, 1, "random", 0, tmp_path)
    assert [len(random_team["success_at_k"][str(k)]) for k in (1, 2, 3)] == [2, 2, 2]
    assert "agent_agrees_with_solver" not in random_team  # no solver search for a random team
    ippo = bench.run(tiny, 1, "ippo", 0, tmp_path)
    assert [len(ippo["success_at_k"][str(k)]) for k in (1, 2, 3)] == [2, 2, 2]
    assert ippo["success_at_k"]["1"] == ippo["last_round_success_at_k"]["1"]  # one round: no choice
    assert ippo["untried_success_at_k"]["1"] == ippo["success_at_k"]["1"]  # round 1 is greedy in both
    assert [len(ippo["untried_success_at_k"][str(k)]) for k in (1, 2, 3)] == [2, 2, 2]
    assert ippo["env_steps"] >= 6 and ippo["training_executions"] == ippo["env_steps"]
    assert 0.0 <= ippo["team_agrees_with_solver"] <= ippo["agent_agrees_with_solver"] <= 1.0
    assert ippo["expert_labelled_tasks"] == 0
    saved = TrainedPolicy.load(tmp_path / "teams" / "l1_ippo_s0")  # the team evaluated, kept
    env = bench.heldout_env(1, False)
    try:
        again = bench.heldout_play(lambda obs, _: saved.act(obs), env, tiny, agreement=True)
    finally:
        env.close()
    assert again["success_at_k"] == ippo["success_at_k"]
    assert again["agent_agrees_with_solver"] == ippo["agent_agrees_with_solver"]
    mixed = bench.run(dataclasses.replace(tiny, rl_cloning_passes=2), 1, "ippo", 0, tmp_path)
    assert mixed["expert_labelled_tasks"] == 2  # after its one PPO iteration, two passes of one task
    assert mixed["training_executions"] == mixed["env_steps"]  # the labels' searches are counted apart
    cloned = bench.run(tiny, 1, "bc_only", 0, tmp_path, clone_seconds=0.5)
    assert cloned["env_steps"] == 0 and cloned["train_s"] >= 0.5
    assert cloned["expert_labelled_tasks"] >= 1  # one pass at least, each on tasks not seen yet
    assert [len(cloned["cloned"]["success_at_k"][str(k)]) for k in (1, 2, 3)] == [2, 2, 2]
    # ippo's warm start was kept and cloning continued started from it: one clone for both kinds
    assert len(list((tmp_path / "cache" / "orchestration" / "warm_starts").glob("*.pt"))) == 1


@pytest.mark.parametrize("payload", ["{not json", '[4, "qmix", 0, {}]', '{"level": 4}', '[4, "lemon", 0]'])
def test_a_bad_logged_line_exits_naming_its_file_and_line(
    bench: ModuleType, tmp_path: Path, payload: str
) -> None:
    log = tmp_path / "runs.log"
    log.write_text(f"noise\nteam-vs-search-run {payload}\n")
    with pytest.raises(SystemExit, match=r"runs\.log:2: "):
        bench.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_each_logged_run_records_the_environment_it_ran_in(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runs in threads, each returning a fixed run instead of playing one."""
    from concurrent.futures import ThreadPoolExecutor

    from orchestrl.training import runtime

    def fake_run(settings: Any, level: int, kind: str, seed: int, out: Path, budget: float) -> dict:
        return json.loads(logged(kind, seed, [0.5, 0.6, 0.7], level=level).split(" ", 1)[1])[3]

    monkeypatch.setattr(bench, "run", fake_run)
    monkeypatch.setattr(
        runtime, "worker_pool", lambda jobs, run_dir, fresh_per_task=False: ThreadPoolExecutor(jobs)
    )
    log = tmp_path / "runs.log"
    argv = ["--levels", "1", "--seeds", "1", "--kinds", "solver", "random", "--log", str(log)]
    saved = dict(os.environ)  # the benchmark sets its run dir's defaults
    try:
        report = bench.main([*argv, "--out", str(tmp_path / "out")])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    runs = bench.read_runs([log])
    assert sorted(kind for _, kind, _ in runs) == ["random", "solver"]
    libraries = runs[(1, "solver", 0)]["environment"]["libraries"]
    assert libraries["torch"] == version("torch")
    assert report["levels"]["1"]["environments"] == {
        "library_sets": [{"libraries": libraries, "runs": 2}],
        "unrecorded_runs": 0,
    }
