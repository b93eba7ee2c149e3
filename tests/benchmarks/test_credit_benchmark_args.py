"""The credit benchmark's command line, its coma-vs-ippo statistic, its first reach of 0.8 against
env steps and against scored executions, and its replay cost (no training: no Ray, no env)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from credit_helpers import load_benchmark, unload_benchmark

from orchestrl.tracking.stats import iqm


@pytest.fixture(scope="module")
def credit() -> Iterator[ModuleType]:
    module = load_benchmark("credit")
    yield module
    unload_benchmark(module)


def test_an_iqm_of_exactly_24_of_30_reaches_0_8(credit: ModuleType) -> None:
    # Five seeds' held-out successes out of 30 tasks: the IQM keeps the middle three,
    # (18 + 24 + 30) / 90 = 24/30 exactly, which the float sum gives as 0.7999999999999999.
    value = iqm([18 / 30, 18 / 30, 24 / 30, 30 / 30, 30 / 30])
    assert value < 0.8  # the rounding this guards against
    assert credit.first_reach([0, 1000, 2000], [0.5, value, 0.9]) == 1000
    assert credit.first_reach([0, 1000], [0.5, 0.8 - 1e-6]) is None  # a real shortfall stays one


@pytest.mark.parametrize(
    ("argv", "culprit"),
    [
        (["--envs", "orchestration_l9"], "orchestration_l9"),
        (["--quick", "--envs", "orchestration_l3"], "orchestration_l3"),  # level 3 has no quick version
        (["--algos", "qmix"], "qmix"),
    ],
)
def test_unknown_env_or_algorithm_exits_naming_it(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], culprit: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        credit.main([*argv, "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert culprit in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing written


def test_improvement_over_ippo_is_the_share_of_run_pairs_won(credit: ModuleType) -> None:
    finals = {
        "ippo": [0.2, 0.4, 0.6],
        "coma": [0.2, 0.4, 0.6],  # the same finals: as many wins as losses, 0.5
        "lemon": [0.7, 0.8, 0.9],  # above every ippo run
    }
    out = credit.improvement_over(finals, "ippo")
    assert set(out) == {"coma", "lemon"}
    assert out["coma"][0] == pytest.approx(0.5)
    assert out["coma"][1] < 0.5 < out["coma"][2]  # cannot tell them apart
    assert out["lemon"] == pytest.approx([1.0, 1.0, 1.0])


def fake_run(
    train_s: float,
    cpu_s: float,
    executions: float = 0.0,
    invalid: float = 0.0,
    sandbox_cpu_s: float | None = None,
) -> dict:
    """A run's time and replay figures; ``sandbox_cpu_s`` None: logged before the sandbox's CPU was."""
    sandbox = {} if sandbox_cpu_s is None else {"train_sandbox_cpu_s": sandbox_cpu_s}
    return {
        "train_s": train_s,
        "train_cpu_s": cpu_s,
        **sandbox,
        "cost": {
            "executions": executions,
            "seconds": 1.0,
            "nodes_run": 6.0,
            "episodes": 10.0,
            "invalid_final": invalid,
        },
    }


def test_replay_cost_compares_lemon_with_its_replay_free_runs(credit: ModuleType) -> None:
    lemon = [fake_run(12.0, 10.0, executions=20.0, invalid=1.0), fake_run(13.0, 12.0, executions=10.0)]
    replay_free = [fake_run(10.0, 9.0), fake_run(10.0, 11.0)]
    for seed, (a, b) in enumerate(zip(lemon, replay_free, strict=True)):
        a["seed"] = b["seed"] = seed
    cost = credit.replay_cost(lemon, replay_free)
    assert cost["wall_time_overhead_pct"] == pytest.approx(25.0)  # 25 s against 20 s
    assert cost["cpu_time_overhead_pct_without_sandbox"] == pytest.approx(10.0)  # 22 s against 20 s
    assert cost["cpu_time_overhead_pct"] is None  # the sandbox's CPU was not measured
    assert cost["extra_executions_per_episode"] == pytest.approx(30.0 / 20.0)
    assert cost["invalid_final_per_episode"] == pytest.approx(1.0 / 20.0)
    assert cost["nodes_rerun_per_execution"] == pytest.approx(12.0 / 30.0)
    assert cost["replay_share_pct"] == pytest.approx(100.0 * 2.0 / 23.0)
    assert cost["paired_seeds"] == [0, 1]
    alone = credit.replay_cost(lemon, [])
    assert alone["wall_time_overhead_pct"] is None and alone["extra_executions_per_episode"] == 1.5
    assert credit.replay_cost([], replay_free) == {}


def test_replay_cost_compares_only_seeds_that_both_ran_with_the_same_optimizer_step(
    credit: ModuleType,
) -> None:
    lemon = [{**fake_run(12.0, 10.0, executions=10.0), "seed": s} for s in range(3)]
    lemon[2]["fast_step"] = True  # lemon seed 2 took the fast step, lemon_gae seed 2 RLlib's
    replay_free = [{**fake_run(10.0, 10.0), "seed": s} for s in (1, 2, 3)]  # seed 0 and 3 unpaired
    cost = credit.replay_cost(lemon, replay_free)
    assert cost["paired_seeds"] == [1]
    assert cost["wall_time_overhead_pct"] == pytest.approx(20.0)  # 12 s against 10 s: seed 1 only
    assert cost["extra_executions_per_episode"] == pytest.approx(1.0)  # every lemon run counts here
    assert credit.replay_cost(lemon, [{**fake_run(9.0, 9.0), "seed": 7}])["wall_time_overhead_pct"] is None


def test_the_replay_cost_in_cpu_time_counts_the_sandbox_workers(credit: ModuleType) -> None:
    # lemon: 10 s in its process + 8 s in the sandbox's; lemon_gae: 9 s + 3 s, on each seed
    lemon = [{**fake_run(12.0, 10.0, executions=10.0, sandbox_cpu_s=8.0), "seed": s} for s in (0, 1)]
    replay_free = [{**fake_run(10.0, 9.0, sandbox_cpu_s=3.0), "seed": s} for s in (0, 1)]
    cost = credit.replay_cost(lemon, replay_free)
    assert cost["cpu_time_overhead_pct"] == pytest.approx(50.0)  # 36 s against 24 s
    assert cost["cpu_time_overhead_pct_without_sandbox"] == pytest.approx(100.0 / 9.0)  # 20 s against 18 s
    assert (cost["lemon_train_cpu_s"], cost["replay_free_train_cpu_s"]) == pytest.approx((36.0, 24.0))
    replay_free[1] = {**fake_run(10.0, 9.0), "seed": 1}  # one paired run without the sandbox's CPU
    assert credit.replay_cost(lemon, replay_free)["cpu_time_overhead_pct"] is None


def test_printed_report_has_exactly_the_eight_keys_per_env_and_algorithm(credit: ModuleType) -> None:
    details = {
        env: {
            "final_iqm": {"ippo": 0.4, "lemon": 0.8},
            "ci95": {"ippo": [0.3, 0.5], "lemon": [0.7, 0.9]},
            "steps_to_0_8": {"ippo": None, "lemon": 6000},
            "executions_to_0_8": {"ippo": None, "lemon": 20000},
            "p_improvement_vs_ippo": {"lemon": [1.0, 1.0, 1.0]},
            "p_improvement_vs_lemon_gae": {},
            "replay_cost": {"wall_time_overhead_pct": 20.0},
            "environments": {"library_sets": [], "unrecorded_runs": 2},
            "curves": {},
        }
        for env in ("orchestration_l2", "orchestration_l3")
    }
    out = credit.report(details)
    assert list(out) == [
        "final_iqm",
        "ci95",
        "steps_to_0_8",
        "executions_to_0_8",
        "p_improvement_vs_ippo",
        "p_improvement_vs_lemon_gae",
        "replay_cost",
        "environments",
    ]
    assert out["executions_to_0_8"]["orchestration_l2"] == {"ippo": None, "lemon": 20000}
    assert out["final_iqm"]["orchestration_l3"]["lemon"] == 0.8
    assert out["replay_cost"]["orchestration_l2"] == {"wall_time_overhead_pct": 20.0}


def test_the_replay_free_reference_is_lemon_with_gae(credit: ModuleType) -> None:
    bench = credit.benches(quick=False)["orchestration_k3_l4"]
    assert bench.kwargs["level"] == 4 and bench.default
    assert credit.experiment(bench, "lemon_gae", 0)["algorithm"] == {"name": "lemon", "advantage": "gae"}
    assert credit.experiment(bench, "coma_cv", 0)["algorithm"]["name"] == "coma_cv"
    quick = credit.benches(quick=True)
    assert [n for n, b in quick.items() if b.default] == ["orchestration_k3_l2"]


def test_the_full_run_measures_credit_in_team_vs_search_setting_from_one_clone_per_seed(
    credit: ModuleType, tmp_path: Path
) -> None:
    import team_vs_search

    bench = credit.benches(quick=False)["orchestration_k3_l5"]
    settings = team_vs_search.FULL
    made = {a: credit.experiment(bench, a, 3, tmp_path) for a in ("ippo", "lemon", "lemon_gae")}
    for exp in made.values():
        assert exp["env"]["kwargs"] == {
            "level": 5,
            "task_pool": credit.TASK_POOL,
            "rounds": team_vs_search.ROUNDS,
            "round_reward": "answer",
        }
        assert exp["model"] == {"hidden": [256, 256], "option_rows": True}
        assert exp["warm_start"] == {
            "episodes": settings.warm_episodes,
            "epochs": settings.warm_epochs,
            "dagger_rounds": settings.dagger_rounds,
            "reuse": True,
        }
        assert exp["training"]["lr"] == settings.lr and exp["training"]["train_batch_size"] == settings.batch
        assert (exp["run_dir"], exp["seed"]) == (str(tmp_path), 3)  # where the seed's clone is kept
    assert bench.success_key == "answer_success" and bench.budget == settings.iterations * settings.batch
    saved = credit.benches(quick=False)["orchestration_l4"]  # the saved logs' setting, by --envs
    assert not saved.default and saved.success_key == "success" and "rounds" not in saved.kwargs
    assert "option_rows" not in credit.experiment(saved, "ippo", 0)["model"]


def test_lemon_uncentred_is_lemon_without_centring_and_opt_in(credit: ModuleType) -> None:
    bench = credit.benches(quick=False)["orchestration_l3"]
    assert credit.experiment(bench, "lemon_uncentred", 0)["algorithm"] == {
        "name": "lemon",
        "center_delta": False,
    }
    assert "lemon_uncentred" not in credit.ALGORITHMS  # not in the default set
    two = credit.experiment(bench, "lemon_two_replays", 0)["algorithm"]
    assert two == {"name": "lemon", "replay_agents": 2}
    assert "lemon_two_replays" not in credit.ALGORITHMS and "lemon_two_replays" in credit.REPLAYING


def logged_run(finals: list[float], wall_s: float, executions: list[int] | None = None) -> dict:
    """A run as ``train_run`` returns it: held-out success and return at 0, 1,000 and 2,000 steps,
    and the scored executions at each (None: a run logged before they were recorded)."""
    return {
        "steps": [0, 1000, 2000],
        **({} if executions is None else {"executions": executions}),
        "curves": {"success": finals, "return": [2.0 * f for f in finals]},
        "env_steps_sampled": 2000,
        "wall_s": wall_s,
        **fake_run(wall_s / 2, wall_s / 3),
        "critic_ev": [0.1, 0.3],
    }


def test_summarise_rebuilds_one_report_from_the_logs_of_several_invocations(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = "orchestration_l3"
    first, second = tmp_path / "seeds_0_1.err", tmp_path / "seed_2.err"
    ippo = {s: [0.0, 0.5, 0.6 + 0.1 * s] for s in range(3)}
    lemon = {s: [0.0, 0.8, 0.9] for s in range(3)}
    lines = ["a warning from a worker"]
    for seed in (0, 1):
        lines += [f"{credit.RUN_LINE} {json.dumps([env, 'lemon', seed, logged_run(lemon[seed], 9.0)])}"]
        lines += [f"{credit.RUN_LINE} {json.dumps([env, 'ippo', seed, logged_run(ippo[seed], 6.0)])}"]
    first.write_text("\n".join(lines) + "\n")
    second.write_text(
        f"{credit.RUN_LINE} {json.dumps([env, 'ippo', 2, logged_run(ippo[2], 6.0)])}\n"
        f"{credit.RUN_LINE} {json.dumps([env, 'lemon', 2, logged_run(lemon[2], 9.0)])}\n"
    )
    out = tmp_path / "out"
    credit.main(["--summarise", str(first), str(second), "--out", str(out)])
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == list(credit.REPORT_KEYS)
    assert list(printed["final_iqm"][env]) == ["ippo", "lemon"]  # ALGORITHMS order, not the log's
    assert printed["final_iqm"][env]["ippo"] == pytest.approx(0.7)  # IQM of 0.6, 0.7, 0.8
    assert printed["steps_to_0_8"][env] == {"ippo": None, "lemon": 1000}
    saved = json.loads((out / "credit.json").read_text())
    assert saved["details"][env]["seeds_per_algorithm"] == {"ippo": 3, "lemon": 3}
    assert saved["details"][env]["final_per_seed"]["ippo"] == [0.6, 0.7, 0.8]  # seed order
    assert saved["meta"]["seeds"] == {env: {"ippo": [0, 1, 2], "lemon": [0, 1, 2]}}


def test_summarise_without_run_lines_exits_naming_the_log(credit: ModuleType, tmp_path: Path) -> None:
    log = tmp_path / "empty.err"
    log.write_text("only warnings\n")
    with pytest.raises(SystemExit) as exit_info:
        credit.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    assert str(log) in str(exit_info.value.code)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("line", "culprit"),
    [
        ("credit-run [1, 2", "not [env, algo, seed, run]"),
        ('credit-run ["orchestration_l3", "qmix", 0, {}]', "qmix"),
    ],
)
def test_a_bad_run_line_exits_naming_the_log_and_line(
    credit: ModuleType, tmp_path: Path, line: str, culprit: str
) -> None:
    log = tmp_path / "bad.err"
    log.write_text(f"a warning\n{line}\n")
    with pytest.raises(SystemExit) as exit_info:
        credit.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    assert f"{log}:2" in str(exit_info.value.code) and culprit in str(exit_info.value.code)
    assert not (tmp_path / "out").exists()


def test_the_task_store_is_filled_with_every_training_task_before_the_runs(
    credit: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from orchestrl.envs.orchestration import tasks
    from orchestrl.envs.orchestration.task_store import ENV_VAR, TaskStore

    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    bench = credit.benches(False)["orchestration_l2"]
    bench = replace(bench, kwargs={**bench.kwargs, "task_pool": 3})
    tasks._generate.cache_clear()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = credit.warm_task_store({"orchestration_l2": bench}, pool, jobs=2)
            again = credit.warm_task_store({"orchestration_l2": bench}, pool, jobs=2)
    finally:
        tasks._generate.cache_clear()
    assert (first["generated"], again["generated"]) == (3, 0)
    store = TaskStore(tmp_path)
    assert all(store.load(2, "train", seed).key.seed == seed for seed in range(3))
    assert not store.path(2, "train", 3).exists()  # the pool only


@pytest.fixture
def in_threads(credit: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, int]]]:
    """The benchmark's runs in threads, each returning a fixed run instead of training one; yields
    the (env, algo, seed) of each run it was asked to train. The environment is restored after."""
    from concurrent.futures import ThreadPoolExecutor

    from orchestrl.training import runtime

    trained: list[tuple[str, str, int]] = []

    named = {**credit.benches(quick=True), **credit.benches(quick=False)}

    def fake_train_run(bench: Any, algo: str, seed: int, run_dir: Path | None = None) -> dict:
        trained.append((next(n for n, b in named.items() if b == bench), algo, seed))
        return logged_run([0.0, 0.5, 0.7], 5.0)

    monkeypatch.setattr(credit, "train_run", fake_train_run)
    monkeypatch.setattr(
        runtime, "worker_pool", lambda jobs, run_dir, fresh_per_task=False: ThreadPoolExecutor(jobs)
    )
    saved = dict(os.environ)
    yield trained
    os.environ.clear()
    os.environ.update(saved)


def test_a_resumed_benchmark_trains_only_the_runs_its_log_lacks_and_appends_them(
    credit: ModuleType, in_threads: list, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env, log = "orchestration_l3", tmp_path / "l3.log"
    log.write_text(
        "a warning\n"
        f"{credit.RUN_LINE} {json.dumps([env, 'lemon', 0, logged_run([0.0, 0.8, 0.9], 9.0)])}\n"
        f"{credit.RUN_LINE} {json.dumps([env, 'ippo', 1, logged_run([0.0, 0.4, 0.6], 6.0)])}\n"
    )
    argv = ["--envs", env, "--algos", "ippo", "lemon", "--seeds", "2", "--log", str(log)]
    credit.main([*argv, "--out", str(tmp_path / "out")])
    assert sorted(in_threads) == [(env, "ippo", 0), (env, "lemon", 1)]
    assert credit.read_runs([log]).keys() == {(env, a, s) for a in ("ippo", "lemon") for s in (0, 1)}
    printed = json.loads(capsys.readouterr().out)
    assert printed["final_iqm"][env]["lemon"] == pytest.approx(0.8)  # 0.9 read back, 0.7 trained
    trained = credit.read_runs([log])[(env, "ippo", 0)]
    assert trained["environment"]["libraries"]["torch"] == version("torch")  # where it ran, logged
    assert printed["environments"][env] == {  # the two runs read back were logged before that
        "library_sets": [{"libraries": trained["environment"]["libraries"], "runs": 2}],
        "unrecorded_runs": 2,
    }
    saved = json.loads((tmp_path / "out" / "credit.json").read_text())
    assert saved["meta"]["log"] == {"path": str(log), "runs_read": 2}

    in_threads.clear()
    credit.main([*argv, "--out", str(tmp_path / "again")])  # every run logged: nothing to train
    assert in_threads == []
    assert len([line for line in log.read_text().splitlines() if line.startswith(credit.RUN_LINE)]) == 4


@pytest.mark.parametrize("where", ["a_dir", "no_such_dir/l3.log"])
def test_a_log_that_cannot_be_a_file_exits_naming_it(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "a_dir").mkdir()
    with pytest.raises(SystemExit) as exit_info:
        credit.main(
            ["--envs", "orchestration_l3", "--log", str(tmp_path / where), "--out", str(tmp_path / "out")]
        )
    assert exit_info.value.code == 2
    assert str(tmp_path / where) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def summarised(credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str], runs: list) -> tuple:
    """(printed report, saved details of orchestration_l4) of ``--summarise`` over a log holding
    ``runs``, each ``(algo, seed, run)``."""
    log = tmp_path / "l4.log"
    log.write_text(
        "".join(f"{credit.RUN_LINE} {json.dumps(['orchestration_l4', a, s, r])}\n" for a, s, r in runs)
    )
    credit.main(["--summarise", str(log), "--out", str(tmp_path / "out")])
    printed = json.loads(capsys.readouterr().out)
    return printed, json.loads((tmp_path / "out" / "credit.json").read_text())["details"]["orchestration_l4"]


def test_summarise_puts_every_algorithm_on_scored_executions(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ippo: no replays, every seed at the same executions; at 1,008 the seeds' held-out successes
    # out of 30 tasks are 18, 18, 24, 30, 30: an IQM of exactly 24/30, which reaches 0.8
    ippo = [(s, logged_run([0.0, v, 1.0], 6.0, [0, 1008, 2016])) for s, v in enumerate([0.6, 0.6, 0.8, 1, 1])]
    # lemon: replays make each seed spend its own executions; seed 2 never reaches 0.8
    lemon = [
        (0, logged_run([0.0, 1.0, 1.0], 9.0, [0, 2000, 4000])),
        (1, logged_run([0.0, 0.2, 1.0], 9.0, [0, 5000, 10000])),
        (2, logged_run([0.0, 0.5, 0.5], 9.0, [0, 6000, 12000])),
    ]
    replay_free = [(s, logged_run([0.0, f, f], 6.0, [0, 1008, 2016])) for s, f in enumerate([0.2, 0.4, 0.6])]
    runs = (
        [("ippo", *r) for r in ippo]
        + [("lemon", *r) for r in lemon]
        + [("lemon_gae", *r) for r in replay_free]
    )
    printed, details = summarised(credit, tmp_path, capsys, runs)
    assert list(printed) == list(credit.REPORT_KEYS)
    assert printed["executions_to_0_8"]["orchestration_l4"] == {
        "ippo": 1008,
        "lemon": 10000,
        "lemon_gae": None,
    }
    # lemon at x executions counts each seed's last evaluation within x (seed 0's run ended at
    # 4,000 with 1.0): at 10,000 the seeds stand at 1.0, 1.0 and 0.5, first IQM over 0.8. By env
    # steps it gets there at 2,000; averaging the seeds' executions per evaluation would say 8,667.
    assert printed["steps_to_0_8"]["orchestration_l4"]["lemon"] == 2000
    assert details["executions_to_0_8_per_seed"]["lemon"] == [2000, 10000, None]
    assert details["curves_executions"]["lemon"]["executions"] == [0, 2000, 4000, 5000, 6000, 10000, 12000]
    assert details["curves_executions"]["lemon"]["iqm"] == pytest.approx(
        [0.0, 1 / 3, 1 / 3, 0.4, 1.7 / 3, 2.5 / 3, 2.5 / 3]
    )
    assert details["executions_per_run"]["lemon"] == pytest.approx(26000 / 3)
    # a seed that never reaches 0.8 counts at its run's own budget (2,000), not the bench's
    assert details["budget_env_steps"] == 2000
    assert details["steps_to_0_8_seed_iqm"]["lemon"] == pytest.approx(5000 / 3)  # 1,000, 2,000, 2,000
    # P(X > lemon_gae) from the finals: lemon's 1.0, 1.0, 0.5 against 0.2, 0.4, 0.6 win 8 pairs of 9
    versus = printed["p_improvement_vs_lemon_gae"]["orchestration_l4"]
    assert set(versus) == {"ippo", "lemon"}
    assert versus["lemon"][0] == pytest.approx(8 / 9) and versus["ippo"] == pytest.approx([1.0, 1.0, 1.0])
    assert printed["p_improvement_vs_ippo"]["orchestration_l4"]["lemon"][0] == pytest.approx(1 / 3)


def test_runs_logged_without_their_executions_get_null_executions_figures(
    credit: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = [0.0, 0.9, 0.9]  # reaches 0.8: only the missing record leaves its executions null
    runs = [("ippo", s, logged_run(old, 6.0)) for s in (0, 1)]
    runs += [("lemon", 0, logged_run(old, 9.0, [0, 3000, 6000])), ("lemon", 1, logged_run(old, 9.0))]
    runs += [("lemon_gae", s, logged_run([0.0, 0.5, 0.5], 6.0)) for s in (0, 1)]
    printed, details = summarised(credit, tmp_path, capsys, runs)
    assert printed["executions_to_0_8"]["orchestration_l4"] == {
        "ippo": None,
        "lemon": None,
        "lemon_gae": None,
    }
    assert printed["steps_to_0_8"]["orchestration_l4"] == {"ippo": 1000, "lemon": 1000, "lemon_gae": None}
    assert details["executions_per_run"] == {"ippo": None, "lemon": None, "lemon_gae": None}
    assert details["executions_to_0_8_per_seed"]["lemon"] is None  # one of its seeds lacks the record
    assert details["curves_executions"] == {}
    # P(> lemon_gae) needs only the finals: the old logs' runs have it
    assert printed["p_improvement_vs_lemon_gae"]["orchestration_l4"]["ippo"] == pytest.approx([1.0, 1.0, 1.0])


def test_the_full_run_trains_five_seeds_of_every_algorithm_at_level_4_and_of_lemons_rivals_at_5(
    credit: ModuleType, in_threads: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(credit, "warm_task_store", lambda chosen, pool, jobs: {})  # no 2,000 tasks
    credit.main(["--out", str(tmp_path / "out")])
    envs = ("orchestration_k3_l4", "orchestration_k3_l5")
    algos = {
        "orchestration_k3_l4": credit.ALGORITHMS,
        "orchestration_k3_l5": ("ippo", "mappo", "lemon", "lemon_gae"),
    }
    assert sorted(in_threads) == sorted((e, a, s) for e in envs for a in algos[e] for s in range(5))
    assert "lemon_gae" in credit.ALGORITHMS
    full = credit.benches(quick=False)
    assert [n for n, b in full.items() if b.default] == list(envs)
    assert full["orchestration_k3_l5"].kwargs["level"] == 5 and full["orchestration_k3_l5"].scored_executions
    assert full["orchestration_k3_l4"].budget == full["orchestration_k3_l5"].budget
    assert {"orchestration_l2", "orchestration_l3", "orchestration_l4"} <= set(full)  # saved logs, by --envs


def test_held_out_success_is_the_answer_in_the_search_setting_and_the_final_spec_in_the_saved_one(
    credit: ModuleType,
) -> None:
    from types import SimpleNamespace

    # the last round's spec failed, an earlier round's answer held every example row
    metrics = {"success": 0.0, "answer_success": 1.0}
    episode = SimpleNamespace(get_return=lambda: 2.0, get_infos=lambda t: {"agent_0": {"metrics": metrics}})
    runner = SimpleNamespace(set_state=lambda state: None, sample=lambda **kw: [episode, episode])
    learner = SimpleNamespace(module=SimpleNamespace(get_state=lambda inference_only: {}))
    full = credit.benches(quick=False)
    assert credit.evaluate(full["orchestration_k3_l4"], runner, learner) == {"return": 2.0, "success": 1.0}
    assert credit.evaluate(full["orchestration_l4"], runner, learner) == {"return": 2.0, "success": 0.0}
