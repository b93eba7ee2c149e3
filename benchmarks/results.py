"""Builds ``benchmarks/RESULTS.md``, the one home of the project's measured figures, from saved
benchmark outputs only: nothing is trained or timed here.

Sources:

- ``benchmarks/logs/``: the per-run lines of the long benchmarks (``benchmarks/credit.py``,
  ``benchmarks/neuromas.py``, ``benchmarks/spread_wallclock.py``), read back and summarised by those
  benchmarks' own ``--summarise`` code (``credit.read_runs`` / ``credit.summarise``,
  ``neuromas.read_log`` / ``neuromas.tabulate``, ``spread_wallclock.read_runs`` /
  ``spread_wallclock.report``: the same IQMs and seeded bootstrap CIs their ``--summarise`` prints);
- ``benchmarks/results/*.json``: what a benchmark printed, saved as it came
  (``python benchmarks/X.py ... > benchmarks/results/X.json``). :data:`SAVED` names the command of
  each file; a section appears only when its file is there.

The output is deterministic (no clock, no machine state; every bootstrap seeded): the same inputs
give the same bytes, and ``tests/benchmarks/test_results.py`` fails when the committed file is not
what :func:`render` returns.

Run::

    .venv/bin/python benchmarks/results.py            # rewrites benchmarks/RESULTS.md (make results)
    .venv/bin/python benchmarks/results.py --check    # exit 1 if benchmarks/RESULTS.md is stale
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from orchestrl.envs.orchestration.tasks import LEVELS  # noqa: E402

LOGS = HERE / "logs"
SAVED_DIR = HERE / "results"
OUTPUT = HERE / "RESULTS.md"

AGENTS = {number: level.agents for number, level in LEVELS.items()}
"""Agents per orchestration level (the env's design)."""


def sibling(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as a module, registered in ``sys.modules`` under
    ``results_<name>`` (its dataclasses look their module up there)."""
    key = f"results_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(key, None)
        raise
    return module


# --- formatting ---------------------------------------------------------------------------------


def num(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def ci(low_high: list[float] | tuple[float, float], digits: int = 3) -> str:
    low, high = low_high
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def steps(x: int | None) -> str:
    return "never" if x is None else f"{x:,}"


def seed_range(seeds: list[int]) -> str:
    seeds = sorted(seeds)
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(map(str, seeds))


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:+.1f}%"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def commands(title: str, lines: list[str]) -> list[str]:
    return [f"{title}:", "", "```bash", *lines, "```"]


def environment_lines(environments: dict[str, Any] | None) -> list[str]:
    """What the runs recorded of their install (``run_log.environments``), as one paragraph: the same
    seed of the same code ends elsewhere under other library versions, so a reader can tell which
    figures came from the same install. Nothing for a report made before runs recorded it."""
    if environments is None:
        return []

    def runs(n: int) -> str:
        return f"{n} run{'s' if n != 1 else ''}"

    parts = [
        f"{runs(e['runs'])} on "
        + ", ".join(f"{name} {v or 'not installed'}" for name, v in e["libraries"].items())
        for e in environments["library_sets"]
    ]
    unrecorded = environments["unrecorded_runs"]
    if unrecorded:
        parts.append(f"{runs(unrecorded)} logged before runs recorded their libraries (install not recorded)")
    return ["", f"Installs: {'; '.join(parts)}."] if parts else []


# --- counterfactual credit (benchmarks/credit.py) -----------------------------------------------


@dataclass(frozen=True)
class CreditSection:
    title: str
    env: str
    logs: tuple[str, ...]
    produced: tuple[str, ...]
    """The invocations whose per-run lines the logs keep."""
    notes: tuple[str, ...] = ()


CREDIT = (
    CreditSection(
        "Level 2",
        "orchestration_l2",
        ("credit_v2_l2.log",),
        (
            "python benchmarks/credit.py --envs orchestration_l2 --algos lemon lemon_gae --seeds 5 --jobs 1",
            "python benchmarks/credit.py --envs orchestration_l2 --algos mappo coma coma_cv --seeds 5"
            " --jobs 1",
            "python benchmarks/credit.py --envs orchestration_l2 --algos ippo --seeds 3 --jobs 1",
            "python benchmarks/credit.py --envs orchestration_l2 --algos ippo --seeds 2 --first-seed 3"
            " --jobs 2",
        ),
        (
            "Each run trained in a fresh process with `PYTHONHASHSEED=0`, two invocations at a time. "
            "ippo's seeds 0–2 and mappo's first run generated their training tasks themselves (the "
            "task store came later): their success figures compare, their wall times do not.",
        ),
    ),
    CreditSection(
        "Level 3",
        "orchestration_l3",
        ("credit_v2_l3.log", "credit_v2_l3_coma.log", "credit_v2_l3_mappo.log"),
        (
            "python benchmarks/credit.py --envs orchestration_l3 --algos ippo lemon mappo --seeds 5"
            "   # stopped before mappo's seeds 3 and 4",
            "python benchmarks/credit.py --envs orchestration_l3 --algos coma coma_cv --seeds 5",
            "python benchmarks/credit.py --envs orchestration_l3 --algos mappo --seeds 2 --first-seed 3"
            " --jobs 1",
        ),
        (
            "Every level-3 run generated its own 1,000 training tasks (no task store yet), and in the "
            "first two invocations a process trained several runs one after the other: wall times do "
            "not compare across rows. The ippo/lemon/mappo invocation's workers did not fix Python's "
            "hash seed (the others had `PYTHONHASHSEED=0`), so those seeds need not reproduce exactly.",
        ),
    ),
    CreditSection(
        "Level 4",
        "orchestration_l4",
        ("credit_v2_l4.log",),
        (
            "python benchmarks/credit.py --envs orchestration_l4 --algos ALGO --seeds 1 --first-seed SEED"
            " --jobs 1"
            " --log benchmarks/logs/credit_v2_l4.log   # one invocation per run",
            "python benchmarks/credit.py --envs orchestration_l4 --algos coma --seeds 5 --jobs 1"
            " --log benchmarks/logs/credit_v2_l4.log   # and the same for coma_cv",
        ),
        (
            "Each run trained in a fresh process with `PYTHONHASHSEED=0`, two at a time, its tasks read "
            "from one task store. Runs logged without `fast_step` took RLlib's optimizer step, the "
            "others `FastStepPPOLearner`'s (the same weights, see [Learner step](#learner-step)): their "
            "success figures compare, their times do not; the replay cost pairs only seeds whose lemon "
            "and lemon_gae runs took the same step.",
        ),
    ),
    CreditSection(
        "Level 4 on today's env (pilot: ippo, lemon and lemon_gae, 2 seeds)",
        "orchestration_l4",
        ("credit_v3_l4_pilot.log",),
        (
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_l4 --algos ippo lemon"
            " lemon_gae --seeds 2 --jobs 2 --log benchmarks/logs/credit_v3_l4_pilot.log",
        ),
        (
            "Measured on the observation without the solver's conclusions, at the full run's budget. "
            "The warm start (the expert cloned on 100 training tasks for 6 epochs) leaves every greedy "
            "team at 0 held-out success, and 3,000 env steps move none of them off it: only the team "
            "return separates the algorithms, and here lemon does not lead it. The full run's goal "
            "(0.8 held-out success, or the highest final IQM) needs a start that solves some tasks, "
            "as the team against search's cloning and DAgger do. Each run trained in a fresh process, "
            "two at a time (the two seeds of one algorithm together), its tasks read from one task "
            "store.",
        ),
    ),
    CreditSection(
        "Level 4 in the team-against-search setting (5 seeds)",
        "orchestration_k3_l4",
        ("credit_v3_k3_l4_pilot.log",),
        (
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos ippo lemon"
            " lemon_gae --seeds 2 --jobs 2 --log benchmarks/logs/credit_v3_k3_l4_pilot.log",
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos mappo coma"
            " lemon_two_replays --seeds 2 --jobs 2 --log benchmarks/logs/credit_v3_k3_l4_pilot.log",
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos ippo mappo coma"
            " lemon lemon_gae lemon_two_replays --seeds 5 --jobs 2"
            " --log benchmarks/logs/credit_v3_k3_l4_pilot.log"
            "   # stopped after coma's seed 2, beside team_vs_search.py throughout",
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos coma --seeds 5"
            " --jobs 1 --log benchmarks/logs/credit_v3_k3_l4_pilot.log"
            "   # coma's seeds 3-4, beside team_vs_search.py, then make test",
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos lemon lemon_gae"
            " lemon_two_replays --seeds 5 --jobs 2 --log benchmarks/logs/credit_v3_k3_l4_pilot.log"
            "   # their seeds 2-4, in a later install, beside NeuroMAS runs",
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos ippo mappo coma"
            " --first-seed 2 --seeds 3 --jobs 2 --log NEW.log   # seeds 2-4 again in that install, from"
            " the same clones; NEW.log's lines appended to benchmarks/logs/credit_v3_k3_l4_pilot.log",
        ),
        (
            "The full run's setting: `team_vs_search.py`'s env (3 rounds, each rewarded by how much it "
            "improved the team's answer), actor (option rows) and warm start (the solver cloned, then "
            "DAgger), every algorithm of a seed from one stored clone. That start solves 0.53, 0.43, "
            "0.30, 0.37 and 0.57 of the held-out tasks on seeds 0-4, where the saved logs' start solved "
            "none. At 2,880 env steps no algorithm moves far from it, and no CI is apart from another: "
            "lemon does not reach 0.8, and its final IQM is not above ippo's, mappo's or lemon_gae's "
            "with CIs apart. coma's IQM ends below ippo's (0.47, 0.37, 0.33, 0.33, 0.43 against ippo's "
            "0.43, 0.40, 0.27, 0.47, 0.60, from the same clones): the COMA goal is not met here.",
            "lemon_two_replays is lemon replaying two agents' edits per episode (`replay_agents: 2`, "
            "chosen by how much each agent's deltas have varied) instead of all eight: a quarter of "
            "lemon's extra executions for the same final figure here.",
            "Seeds 0-1 of every algorithm ran in one session, seeds 2-4 of every algorithm in a later "
            "one on a reinstalled environment, where the same seed's clone comes out differently (the "
            "earlier session's clones of seeds 2-4 solved 0.33, 0.23 and 0.53; no change to the code's "
            "behaviour lies between them). ippo's, mappo's and coma's runs of seeds 2-4 in the earlier "
            "session are still in the log, above the later ones that replace them (`--summarise` keeps "
            "a key's last line); they ended at 0.40, 0.33, 0.53 (ippo), 0.23, 0.47, 0.60 (mappo) and "
            "0.30, 0.40, 0.30 (coma). Runs logged from now on record their commit and library versions "
            "(`run_log.environment`).",
            "Each run trained in a fresh process with `PYTHONHASHSEED=0`, two at a time, its tasks read "
            "from one task store. The first run of each seed includes the clone in its wall time "
            "(400-480 s for seeds 0-1; 650-715 s for seeds 2-4, which lemon cloned beside a NeuroMAS "
            "run); the others load it in 2-6 s. Seeds 0-1 trained alone, the two seeds of one "
            "algorithm together; seeds 2-4 beside one or two NeuroMAS training processes, so their "
            "wall times are not comparable with seeds 0-1's, and the replay cost above, which pairs "
            "seeds 0-4, is inflated by that load: over seeds 0-1 alone it was +6.5% wall time and +7.9% "
            "CPU time with the sandbox workers.",
        ),
    ),
    CreditSection(
        "Level 4 in the team-against-search setting: COMA's baseline over the agent's whole action "
        "(5 seeds, beside ippo)",
        "orchestration_k3_l4",
        ("credit_v3_k3_l4_coma_marginal.log",),
        (
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l4 --algos coma ippo"
            " --seeds 5 --jobs 2 --log benchmarks/logs/credit_v3_k3_l4_coma_marginal.log"
            "   # alone on the machine, in the install of the section above's seeds 2-4",
        ),
        (
            "coma after a fix to its counterfactual baseline (commit 85fdde3). The actor draws an "
            "agent's duty given its role (`option_rows`), and the batch's distribution inputs hold the "
            "duty's probabilities given the role TAKEN. The section above's coma marginalised the duty "
            "under those, so its baseline depended on the agent's own role, which Eq. 4 marginalises. "
            "Here the duty is marginalised under its distribution given every role "
            "(`ActorCriticModule.option_probs`). Every other knob is the section above's.",
            "ippo ran again beside it in this install: its seeds 2-4 repeat the section above's runs "
            "exactly (every evaluation), so they started from the same clones, and coma's seeds 2-4 "
            "pair with the section above's coma. There coma ended at 0.33, 0.33 and 0.43; with the "
            "fix at 0.40, 0.37 and 0.53. coma's IQM is still below ippo's, P(coma > ippo) 0.36: the "
            "COMA goal is not met. Seeds 0-1 are this install's clones (they solve 0.57 and 0.53 of "
            "the held-out tasks, the section above's seeds 0-1 0.53 and 0.43).",
            "Each run trained in a fresh process with `PYTHONHASHSEED=0`, two at a time; coma made each "
            "seed's clone (its warm-start time) and ippo loaded it.",
        ),
    ),
    CreditSection(
        "Level 5 in the team-against-search setting (pilot, 1 seed)",
        "orchestration_k3_l5",
        ("credit_v3_k3_l5_pilot.log",),
        (
            "PYTHONHASHSEED=0 python benchmarks/credit.py --envs orchestration_k3_l5 --algos ippo lemon"
            " lemon_gae --seeds 1 --jobs 2 --log benchmarks/logs/credit_v3_k3_l5_pilot.log",
        ),
        (
            "One seed, to measure what level 5 costs: the clone (seed 0) took 1,519 s, and it solves "
            "4 of the 30 held-out tasks. ippo and lemon started together (lemon waited for ippo's "
            "clone, then loaded it); lemon_gae ran beside lemon once ippo had finished. The level-5 "
            "CIs of one seed are its value alone.",
            "What the full run (`python benchmarks/credit.py`: five seeds; six algorithms at level 4, "
            "ippo, mappo, lemon and lemon_gae at level 5; two runs at a time) costs, from the parts "
            "these two pilots measured: each level's task store about 5 minutes; at level 4 a seed's "
            "clone 400–480 s (coma, whose module class was then in the clone's key, cloned for itself; "
            "it now loads the seed's clone, `warm_start_store.actor_code`) and "
            "each run after it about 300 s; at level 5 a clone about 25 minutes and runs of 300 s "
            "(ippo), 455 s (lemon_gae) and 510 s (lemon). In all about 4 hours, an estimate from "
            "those parts, not a measured run.",
        ),
    ),
)


def credit_details(
    credit: ModuleType, section: CreditSection
) -> tuple[Any, dict[str, Any], dict[str, list[int]]]:
    """``credit.summarise`` over the runs the section's logs hold (what ``--summarise`` prints),
    the bench, and the seeds of each algorithm."""
    runs = credit.read_runs([LOGS / name for name in section.logs])
    bench = credit.benches(False)[section.env]
    by_algo: dict[str, list[dict[str, Any]]] = {}
    seeds: dict[str, list[int]] = {}
    for (env, algo, seed), run in runs.items():
        if env == section.env:
            by_algo.setdefault(algo, []).append({**run, "seed": seed})
            seeds.setdefault(algo, []).append(seed)
    return bench, credit.summarise(bench, by_algo), seeds


def rllib_step_runs(credit: ModuleType, section: CreditSection) -> dict[str, list[int]]:
    runs = credit.read_runs([LOGS / name for name in section.logs])
    out: dict[str, list[int]] = {}
    for (_, algo, seed), run in runs.items():
        if not run.get("fast_step", False):
            out.setdefault(algo, []).append(seed)
    return out


def credit_section(credit: ModuleType, section: CreditSection) -> list[str]:
    bench, d, seeds = credit_details(credit, section)
    level = bench.kwargs["level"]
    logs = " ".join(f"benchmarks/logs/{name}" for name in section.logs)
    dagger = bench.warm_start.get("dagger_rounds", 0)
    success = (
        f"greedy held-out success of the team's answer after round {bench.kwargs['rounds']}"
        if bench.success_key == "answer_success"
        else "greedy held-out success"
    )
    out = [
        f"### {section.title}",
        "",
        f"{AGENTS[level]} agents, {d['budget_env_steps']:,} env steps per run after the warm start "
        f"(the expert cloned on {bench.warm_start['episodes']} training tasks for "
        f"{bench.warm_start['epochs']} epochs{f', then {dagger} rounds of DAgger' if dagger else ''}), "
        f"{success} on the same "
        f"{bench.eval_episodes} held-out tasks right after the warm start and every "
        f"{bench.eval_every * bench.batch:,} env steps. IQM over seeds "
        "[95% stratified-bootstrap CI].",
        "",
        *commands("Produced by", list(section.produced)),
        "",
        *commands("Summarised by", [f"python benchmarks/credit.py --summarise {logs}"]),
        "",
    ]
    # columns of the runs that recorded them: scored executions (env steps plus replays) and
    # P(> lemon_gae) where lemon_gae ran
    executed = any(x is not None for x in d["executions_per_run"].values())
    baselines = [b for b in ("ippo", "lemon_gae") if d[f"p_improvement_vs_{b}"]]
    rows = []
    for algo, finals in d["final_per_seed"].items():
        reach = d["steps_to_0_8_per_seed"][algo]
        by_executions = []
        if executed:
            per_run, seed_reach = d["executions_per_run"][algo], d["executions_to_0_8_per_seed"][algo]
            by_executions = [
                "–" if per_run is None else f"{per_run:,.0f}",
                steps(d["executions_to_0_8"][algo]),
                "–" if seed_reach is None else ", ".join(steps(s) for s in seed_reach),
            ]
        improvement = []
        for baseline in baselines:
            p = d[f"p_improvement_vs_{baseline}"].get(algo)
            improvement.append("–" if p is None else f"{p[0]:.2f} {ci(p[1:], 2)}")
        rows.append(
            [
                algo,
                seed_range(seeds[algo]),
                f"{num(d['final_iqm'][algo])} {ci(d['ci95'][algo])}",
                ", ".join(f"{v:.2f}" for v in finals),
                steps(d["steps_to_0_8"][algo]),
                ", ".join(steps(s) for s in reach),
                *by_executions,
                *improvement,
                f"{num(d['final_iqm_return'][algo], 2)} {ci(d['ci95_return'][algo], 2)}",
                num(d["critic_explained_variance"][algo], 2),
                f"{d['wall_s_per_run'][algo]:,.0f}",
            ]
        )
    header = [
        "algorithm",
        "seeds",
        "final held-out success",
        "per seed",
        "env steps to 0.8 (IQM curve)",
        "per seed",
        *(
            ["scored executions per run", "scored executions to 0.8 (IQM curve)", "per seed"]
            if executed
            else []
        ),
        *(f"P(> {baseline}) [CI]" for baseline in baselines),
        "final held-out team return",
        "critic explained variance",
        "wall s per run",
    ]
    out += table(header, rows)
    curves = d["curves"]
    grid = next(iter(curves.values()))["steps"]
    out += ["", "Held-out success along training (IQM over seeds):", ""]
    curve_rows = []
    for algo, c in curves.items():
        by_step = dict(zip(c["steps"], c["iqm"], strict=True))
        curve_rows.append([algo, *(num(by_step.get(s), 2) for s in grid)])
    out += table(["env steps", *(f"{s:,}" for s in grid)], curve_rows)
    cost = d["replay_cost"]
    if cost:
        out += ["", "LEMON's replays (all lemon runs):", ""]
        out += [
            f"- extra spec executions per episode: {cost['extra_executions_per_episode']:.2f}, "
            f"nodes re-run per execution: {cost['nodes_rerun_per_execution']:.2f} (the node cache "
            "serves the rest);",
            "- episodes whose final spec was invalid (no replay): "
            f"{100 * cost['invalid_final_per_episode']:.1f}%;",
            "- the replays' own time over the rest of lemon's training time: "
            f"{cost['replay_share_pct']:.1f}%;",
        ]
        if cost["paired_seeds"]:
            alone = pct(cost["cpu_time_overhead_pct_without_sandbox"])
            cpu = (
                f"{pct(cost['cpu_time_overhead_pct'])} CPU time of the training processes and the sandbox "
                f"workers ({alone} of the training processes alone)"
                if cost["cpu_time_overhead_pct"] is not None
                # runs logged before the sandbox workers' CPU was measured
                else f"{alone} CPU time of the training processes (the sandbox workers' CPU is not counted)"
            )
            out.append(
                f"- lemon's training time over lemon_gae's (the same runs without replay), seeds "
                f"{seed_range(cost['paired_seeds'])}: {pct(cost['wall_time_overhead_pct'])} wall time, "
                f"{cpu}."
            )
        else:
            out.append("- no lemon_gae runs to compare training time with.")
    variants = {v: c for v, c in d["replay_cost_by_algorithm"].items() if v != "lemon" and c}
    if variants:
        out += ["", "lemon's variants that replay, against the same lemon_gae runs:", ""]
    for variant, other in variants.items():
        out.append(
            f"- {variant}: {other['extra_executions_per_episode']:.2f} extra executions per episode, "
            f"its training time over lemon_gae's {pct(other['wall_time_overhead_pct'])} wall time, "
            f"{pct(other['cpu_time_overhead_pct'])} CPU time with the sandbox workers."
        )
    rllib = rllib_step_runs(credit, section) if section.env == "orchestration_l4" else {}
    notes = list(section.notes)
    if rllib:
        listed = "; ".join(f"{algo} {seed_range(s)}" for algo, s in rllib.items())
        notes.append(f"Runs that took RLlib's optimizer step: {listed}.")
    for note in notes:
        out += ["", note]
    out += environment_lines(d.get("environments"))
    return [*out, ""]


def credit_part() -> list[str]:
    credit = sibling("credit")
    out = [
        "## Counterfactual credit on the LEMON env",
        "",
        "`benchmarks/credit.py`: ippo, mappo, coma (Eq. 4), coma_cv, lemon (replay credit) and "
        "lemon_gae (lemon without replay, the reference for the replay's cost) on the orchestration "
        "env, every algorithm from the same warm start with the same PPO settings and env-step "
        "budget, each run in process (no Ray, one torch thread) on a 2-core machine shared with "
        "other jobs. Final = the last evaluation; steps to 0.8 = the first evaluation at which the "
        "IQM curve (or a seed) reaches 0.8 held-out success; scored executions = env steps plus "
        "lemon's replays (each executes a spec in the sandbox and scores it; runs logged before they "
        "were recorded have no such columns); P(> ippo) = the probability that a run ends above an "
        "ippo run (0.5: a match), P(> lemon_gae) the same against lemon_gae; critic explained "
        "variance = the IQM of each run's mean `vf_explained_var` (for the COMAs, of Q(s, u)). Team "
        "returns are summed over agents.",
        "",
        "The runs of levels 2, 3 and 4 predate the observation without the solver's conclusions "
        "(commit 3c8600d): their agents saw the solver's prior and candidate lists ranked by it. On "
        "today's env the same commands measure teams that must infer the ranking: the last two "
        "sections (pilots at level 4, in the saved logs' setting and in the full run's, "
        "`team_vs_search.py`'s) and the section on the team against search at equal executions are "
        "measured on it.",
        "",
        "To reproduce a level: `python benchmarks/credit.py --envs orchestration_lN --log lN.log` "
        "(resumable: it trains the runs the log lacks, appends each finished run, and prints the "
        "summary over all of them), then `python benchmarks/credit.py --summarise lN.log`; the full "
        "run (levels 4 and 5 in the team-against-search setting): `python benchmarks/credit.py --log "
        "full.log`.",
        "",
    ]
    for section in CREDIT:
        out += credit_section(credit, section)
    return out


# --- NeuroMAS on Text2SQL (benchmarks/neuromas.py) ----------------------------------------------

NEUROMAS_LOG = "neuromas_v2_full.log"
NEUROMAS_BASELINE = "neuromas_v2_full.json"
"""The benchmark's own ``--summarise`` output for the log; only its ``blind_baseline`` is read
(computing it builds the databases: not worth redoing on every render; it trains nothing and does
not depend on the log)."""
VARIANT_LABELS = {
    "neuromas3": "NeuroMAS-3",
    "neuromas5": "NeuroMAS-5",
    "neuromas7": "NeuroMAS-7",
    "neuromas3_cut": "NeuroMAS-3, messages cut",
    "neuromas5_cut": "NeuroMAS-5, messages cut",
    "neuromas7_cut": "NeuroMAS-7, messages cut",
    "neuromas5_reads_all": "NeuroMAS-5, every agent reads the question (`observe: all`)",
    "monolithic": "monolithic agent, NeuroMAS-7's parameter count",
    "neuromas7_grown": "NeuroMAS-7 grown from the same seed's -5, then its own recipe",
    "neuromas7_long": "NeuroMAS-7 from scratch, the env steps of -5 and grown together",
    "neuromas5_contextual": "NeuroMAS-5 `observe: all`, contextual MiniLM states",
    "neuromas5_every": "NeuroMAS-5, every node reads, sequential decisions, adapters",
    "neuromas7_every": "NeuroMAS-7, every node reads, sequential decisions, adapters",
    "monolithic_every": "monolithic agent, sequential decisions, NeuroMAS-7 v3's live parameters",
    "monolithic_compute": "the same monolith, its neuron applied 5 times (compute-matched)",
    "neuromas5_every_es": "NeuroMAS-5 v3, cloned to early stopping",
    "monolithic_every_es": "live-matched monolith, cloned to early stopping",
    "neuromas5_every_rl": "NeuroMAS-5 v3, 16 PPO iterations on the shared reward",
    "neuromas5_every_cf": "NeuroMAS-5 v3, 16 PPO iterations with per-agent counterfactual credit",
    "neuromas5_every_es_rl": "NeuroMAS-5 v3, cloned to early stopping, then 16 PPO iterations",
    "neuromas5_every_es_group_rl": "the same, RL with the group baseline (4 sampled queries per question)",
    "neuromas5_every_ctx_es_rl": "NeuroMAS-5 v3, contextual MiniLM states, early stopping, 16 PPO iterations",
    "neuromas5_every_ctx_es_group_rl": "the same, RL with the group baseline",
    "neuromas5_every_ctx_esdev_rl": "NeuroMAS-5 v3, contextual MiniLM states, early stopping on validation "
    "and dev questions, 16 PPO iterations",
    "neuromas5_every_ctx_esdev_group_rl": "the same, RL with the group baseline (shipped)",
    "neuromas5_every_ctx": "NeuroMAS-5, every node reads, sequential decisions, adapters, "
    "contextual MiniLM states",
    "monolithic_every_ctx": "monolithic agent, sequential decisions, contextual MiniLM states, "
    "NeuroMAS-7's live parameters",
    "neuromas5_every_ctx_esdev": "NeuroMAS-5 v3, contextual MiniLM states, early stopping on validation "
    "and dev questions (the shipped recipe's clone)",
    "monolithic_every_ctx_esdev": "monolithic agent, sequential decisions, contextual MiniLM states, "
    "NeuroMAS-7's live parameters, the same early stopping",
    "monolithic_compute_ctx_esdev": "the same monolith, its neuron applied 5 times (compute-matched)",
}
NEUROMAS_V3_LOG = "neuromas_v3_full.log"
NEUROMAS_V3_BASELINE = "neuromas_v3_full.json"


def neuromas_goals(goals: dict[str, Any]) -> list[str]:
    """The checks ``neuromas.goals`` computes, as bullets."""
    out = []
    met = {True: "met", False: "not met"}
    if "language" in goals:
        g = goals["language"]
        out.append(
            f"- language (hand-written ≥ 0.8 and held-out ≥ 0.9 within 30 CPU-minutes a run): "
            f"{met[g['met']]}; best variant `{g['best_variant_within_30_cpu_minutes']}`, hand-written "
            f"{g['natural_accuracy']:.3f}, held-out {g['heldout_execution_accuracy']:.3f}"
        )
    if "network_vs_monolithic" in goals:
        g = goals["network_vs_monolithic"]
        acc = ", ".join(f"{n} {v:.3f}" for n, v in g["natural_accuracy"].items())
        out.append(
            f"- a network against one agent (NeuroMAS-5 or -7 at or above the monolithic agent on the "
            f"hand-written set): {met[g['met']]}; {acc}"
        )
    if "network_vs_live_matched_monolith" in goals:
        g = goals["network_vs_live_matched_monolith"]
        out.append(
            "- a network against one agent of its live parameters (NeuroMAS-5 or -7 v3 above the "
            f"live-matched monolith on the hand-written set, CIs apart): {met[g['met']]}"
        )
    if "rl_gain" in goals:
        g = goals["rl_gain"]
        out.append(
            "- RL that matters (hand-written accuracy after RL at least +0.05 over the same run's "
            f"clone, CI above 0): {met[g['met']]}; best `{g['best_variant']}` "
            f"{g['natural_gain']:+.3f} {ci(g['ci95'])}"
        )
    if "communication" in goals:
        g = goals["communication"]
        ratio = g["messages_over_reads_all"]
        out.append(
            f"- communication (messages recover ≥ 0.95× of `observe: all`): {met[g['met']]}; "
            f"{ratio['heldout']:.2f}× held-out, {ratio['natural']:.2f}× hand-written"
        )
    if "growth" in goals:
        g = goals["growth"]
        delta = g["grown_minus_scratch_equal_env_steps"]
        out.append(
            f"- growth (grown -7 at or above -7 from scratch with the same env steps): {met[g['met']]}; "
            f"{delta['heldout']:+.3f} held-out, {delta['natural']:+.3f} hand-written (IQM differences)"
        )
    return out


def neuromas_result(log: str, saved_name: str) -> dict[str, Any] | None:
    """A NeuroMAS benchmark log tabulated with its saved summary's blind baseline (None: not run)."""
    saved = SAVED_DIR / saved_name
    if not (LOGS / log).is_file() or not saved.is_file():
        return None
    neuromas = sibling("neuromas")
    return neuromas.tabulate(neuromas.read_log(LOGS / log), json.loads(saved.read_text())["blind_baseline"])


def neuromas_part() -> list[str]:
    result = neuromas_result(NEUROMAS_LOG, NEUROMAS_BASELINE)
    if result is None:
        return []
    budget = sibling("neuromas").FULL
    held, nat, unseen = (
        result["heldout_execution_accuracy"],
        result["natural_accuracy"],
        result["heldout_unseen_grammar_accuracy"],
    )
    out = [
        "## NeuroMAS on Text2SQL",
        "",
        "v2, measured before v3 changed the graph and the observation (numbers linked by range): "
        "the code of that time gives these figures; today's gives the v3 section's.",
        "",
        f"`benchmarks/neuromas.py` (full budget): each run clones the env's expert for "
        f"{budget.bc_epochs} epochs over {budget.bc_samples:,} demonstrations, then takes "
        f"{budget.rl_iterations} PPO iterations of {budget.rl_batch} env steps, in process, two runs "
        "at a time on a 2-core machine shared with other jobs. Execution accuracy on every question "
        "of the test split (three schemas training never saw, half of it phrased by the held-out "
        "grammar) and on the hand-written questions of `tests/data/text2sql_natural.jsonl` over the "
        "same schemas. Unless the variant says otherwise the composer knows the question only "
        "through its messages (`observe: inputs`), words are read through frozen all-MiniLM-L6-v2 "
        "WordPiece vectors and columns are linked to the values a question names. IQM over seeds "
        "[95% stratified-bootstrap CI]; CPU minutes are each run's training process.",
        "",
        *commands("Produced by", ["python benchmarks/neuromas.py 2> benchmarks/logs/neuromas_v2_full.log"]),
        "",
        *commands(
            "Summarised by (the blind baselines come from its saved output)",
            [
                "python benchmarks/neuromas.py --summarise benchmarks/logs/neuromas_v2_full.log"
                " > benchmarks/results/neuromas_v2_full.json"
            ],
        ),
        "",
        "To reproduce: `python benchmarks/neuromas.py 2> neuromas.log` (or `--variants ... --seeds N`), "
        "then `--summarise neuromas.log`.",
        "",
    ]
    rows = []
    for name in held:
        cpu = result["cpu_minutes"][name]
        rows.append(
            [
                VARIANT_LABELS.get(name, name),
                seed_range(result["seeds"][name]),
                f"{held[name]['iqm']:.3f} {ci(held[name]['ci95'])}",
                ", ".join(f"{v:.3f}" for v in held[name]["per_seed"]),
                f"{unseen[name]['iqm']:.3f}",
                f"{nat[name]['iqm']:.3f} {ci(nat[name]['ci95'])}",
                f"{result['params'][name]:,}",
                f"{result['env_steps'][name]:,}",
                f"{cpu['mean']:.1f} / {cpu['max']:.1f}",
            ]
        )
    rows += blind_baseline_rows(result["blind_baseline"], columns=9, heldout_at=2, natural_at=5)
    header = [
        "variant",
        "seeds",
        "held-out schemas",
        "per seed",
        "of which held-out grammar",
        "hand-written",
        "params",
        "env steps",
        "CPU min per run (mean / max)",
    ]
    out += table(header, rows)
    if "grown_at_growth_heldout_per_seed" in result:
        at = ", ".join(f"{v:.3f}" for v in result["grown_at_growth_heldout_per_seed"])
        out += [
            "",
            f"Growth is exact: each grown net scored, before any training, {at} held-out (per seed), "
            "its -5's held-out accuracy.",
        ]
    out += ["", "The checks the benchmark computes (`goals` in `benchmarks/neuromas.py`):", ""]
    out += neuromas_goals(result["goals"])
    out += environment_lines(result["environments"])
    return [*out, ""]


def blind_baseline_rows(
    blind: dict[str, Any], *, columns: int, heldout_at: int, natural_at: int
) -> list[list[str]]:
    """The two blind baselines (the trivial policy the cut variants fall to) as table rows: their
    held-out and hand-written accuracies in the given columns, the rest empty."""
    rows = []
    for label, entry in (
        ("blind baseline: expert extractor, the most common expert composer action", blind),
        (
            "blind baseline: expert extractor, each composer component's most common value",
            blind["per_component_mode"],
        ),
    ):
        row = [label] + [""] * (columns - 1)
        row[heldout_at] = f"{entry['heldout_execution_accuracy']:.3f}"
        row[natural_at] = f"{entry['natural_accuracy']:.3f}"
        rows.append(row)
    return rows


def rl_phase_rows(result: dict[str, Any], labels: dict[str, str] = VARIANT_LABELS) -> list[str]:
    """The RL phase against its two controls, per variant that measured it."""
    controlled = result.get("rl_vs_cloning_continued", {})
    if not controlled:
        return []
    gain = result["rl_gain_over_cloning"]
    rows = []
    for name, versus_more in controlled.items():
        rows.append(
            [
                labels.get(name, name),
                f"{gain[name]['natural']['iqm']:+.3f} {ci(gain[name]['natural']['ci95'])}",
                f"{gain[name]['heldout']['iqm']:+.3f} {ci(gain[name]['heldout']['ci95'])}",
                f"{versus_more['natural']['iqm']:+.3f} {ci(versus_more['natural']['ci95'])}",
                f"{versus_more['heldout']['iqm']:+.3f} {ci(versus_more['heldout']['ci95'])}",
                f"{result['rl_seconds'][name]:.0f}",
            ]
        )
    header = [
        "RL phase",
        "minus the clone, hand-written",
        "minus the clone, held-out",
        "minus cloning continued as long, hand-written",
        "minus cloning continued as long, held-out",
        "RL wall s",
    ]
    # runs logged before their length was: RL_PHASE's at the full budget
    lengths = set(result.get("rl_iterations", {}).values()) or {sibling("neuromas").RL_PHASE["rl_iterations"]}
    iterations = "/".join(str(n) for n in sorted(lengths))
    intro = [
        "",
        f"The RL phase of the `_rl` and `_cf` runs ({iterations} PPO iterations of 256 questions at 1e-4, KL "
        "anchor 0.05 to the clone; `_cf` with 4 re-executed alternatives per agent and episode), "
        "against the same run's clone and against the same clone cloned further for the RL phase's "
        "wall time (per-seed differences, IQM [95% CI]):",
        "",
    ]
    return intro + table(header, rows) + rl_curve_rows(result, labels)


def rl_curve_rows(result: dict[str, Any], labels: dict[str, str] = VARIANT_LABELS) -> list[str]:
    """Accuracy along the RL phase (``--rl-curve``), per variant that scored it: the training
    questions RL samples, the validation split and the hand-written dev set, never the test set."""
    out = []
    for name, points in result.get("rl_curve", {}).items():
        sets = [key for key in points[0] if key != "iteration"]
        rows = [
            [str(p["iteration"]), *(f"{p[key]['iqm']:.3f} {ci(p[key]['ci95'])}" for key in sets)]
            for p in points
        ]
        out += [
            "",
            f"{labels.get(name, name)} along its RL phase (IQM over seeds [95% CI]; the first "
            f"{sibling('neuromas').CURVE_QUESTIONS} training and validation questions, the 30 dev "
            "questions; iteration 0 is the clone):",
            "",
            *table(["PPO iterations", *sets], rows),
        ]
    return out


def neuromas_v3_part() -> list[str]:
    """v3: every node reads, sequential decisions, honest controls, cloning to early stopping."""
    result = neuromas_result(NEUROMAS_V3_LOG, NEUROMAS_V3_BASELINE)
    if result is None:
        return []
    budget = sibling("neuromas").FULL
    out = [
        "## NeuroMAS v3 on Text2SQL: every node works",
        "",
        "The same benchmark and questions as above, on v3's graph: every node reads the question "
        "(hidden ones through queries conditioned on their messages), each has its own low-rank "
        "adapter (rank 8), and the composer decides after the extractor, knowing its choices "
        "(`observe: every`, `sequential: true`). The monoliths decide the same way; the first is "
        "widened to NeuroMAS-7 v3's live parameters (those on some path to the actions, "
        "`NeuromasModule.live_parameters`), the second applies its neuron once per layer of "
        "NeuroMAS-7 (compute-matched). Unless the variant says otherwise a run clones for "
        f"{budget.bc_epochs} epochs over {budget.bc_samples:,} demonstrations; `early stopping` runs "
        f"clone twice the demonstrations for at most {5 * budget.bc_epochs} epochs, stopping 4 epochs "
        "after the best exact agreement with the expert on 512 questions of the validation split's "
        f"schemas. Then {budget.rl_iterations} PPO iterations of {budget.rl_batch} env steps; "
        "`RL gain` is the hand-written accuracy after them minus the same run's before them. CPU ms "
        "per question: writing the test split's queries (forward passes and decoding).",
        "",
        *commands(
            "Produced by",
            [
                "python benchmarks/neuromas.py --variants neuromas5 neuromas5_every neuromas7_every "
                "monolithic_every monolithic_compute neuromas5_every_es monolithic_every_es "
                "2> benchmarks/logs/neuromas_v3_full.log",
                "python benchmarks/neuromas.py --variants neuromas5_every_rl neuromas5_every_cf "
                "2>> benchmarks/logs/neuromas_v3_full.log",
                "python benchmarks/neuromas.py --variants neuromas5_every_es_rl "
                "2>> benchmarks/logs/neuromas_v3_full.log",
            ],
        ),
        "",
        *commands(
            "Summarised by",
            [
                "python benchmarks/neuromas.py --summarise benchmarks/logs/neuromas_v3_full.log"
                " > benchmarks/results/neuromas_v3_full.json"
            ],
        ),
        "",
    ]
    return [*out, *neuromas_v3_table(result), *environment_lines(result["environments"]), ""]


def neuromas_v3_table(result: dict[str, Any], labels: dict[str, str] = VARIANT_LABELS) -> list[str]:
    """A v3 run's table (with free decoding's hand-written accuracy where the runs scored it), its
    RL phase, the network-against-monolith lines and the goals."""
    held, nat = result["heldout_execution_accuracy"], result["natural_accuracy"]
    unseen = result["heldout_unseen_grammar_accuracy"]
    gain = result.get("rl_gain_over_cloning", {})
    free = result.get("free_decoding", {})
    out: list[str] = []
    rows = []
    for name in held:
        rows.append(
            [
                labels.get(name, name),
                seed_range(result["seeds"][name]),
                f"{held[name]['iqm']:.3f} {ci(held[name]['ci95'])}",
                f"{unseen[name]['iqm']:.3f}",
                f"{nat[name]['iqm']:.3f} {ci(nat[name]['ci95'])}",
                *([f"{free[name]['natural']['iqm']:.3f}" if name in free else ""] if free else []),
                ", ".join(f"{v:.3f}" for v in nat[name]["per_seed"]),
                f"{gain[name]['natural']['iqm']:+.3f} {ci(gain[name]['natural']['ci95'])}"
                if name in gain
                else "",
                ", ".join(str(e) for e in result.get("bc_epochs", {}).get(name, [])),
                f"{result['live_params'].get(name, 0):,} / {result['params'][name]:,}",
                f"{result['cpu_ms_per_question'].get(name, float('nan')):.2f}",
                f"{result['cpu_minutes'][name]['mean']:.1f} / {result['cpu_minutes'][name]['max']:.1f}",
            ]
        )
    header = [
        "variant",
        "seeds",
        "held-out schemas",
        "of it, the unseen grammar",
        "hand-written",
        *(["hand-written, free decoding"] if free else []),
        "hand-written per seed",
        "RL gain (hand-written)",
        "cloning epochs",
        "live / all params",
        "CPU ms per question",
        "CPU min per run (mean / max)",
    ]
    rows += blind_baseline_rows(result["blind_baseline"], columns=len(header), heldout_at=2, natural_at=4)
    out += table(header, rows)
    out += rl_phase_rows(result, labels)
    out.append("")
    for key, label in (
        ("network_vs_monolith", "against the live-matched monolith"),
        ("network_vs_compute_matched", "against the compute-matched monolith"),
    ):
        for name, v in result.get(key, {}).items():
            apart = {True: "CIs apart", False: "CIs not apart"}
            out.append(
                f"- {labels.get(name, name)} {label} (IQM differences): "
                f"{v['natural_iqm_difference']:+.3f} hand-written, {apart[v['cis_apart']]}; "
                f"{v['heldout_iqm_difference']:+.3f} held-out schemas, {apart[v['heldout_cis_apart']]}."
            )
    out += ["", "The checks the benchmark computes (`goals` in `benchmarks/neuromas.py`):", ""]
    out += neuromas_goals(result["goals"])
    return out


@dataclass(frozen=True)
class NeuromasRerun:
    """A later run of v3's recipes after a change to the data or the decoding: its own section."""

    log: str
    saved: str
    title: str
    intro: str
    variants: str
    seeds: int = 3
    flags: str = ""
    """The benchmark's other flags the run took (e.g. ``--rl-iterations``)."""
    produced_by: tuple[str, ...] = ()
    """The commands, where the run took more than one (default: one, from the fields above)."""
    labels: tuple[tuple[str, str], ...] = ()
    """Row labels of this section's own, over ``VARIANT_LABELS``."""


NEUROMAS_RERUNS = (
    NeuromasRerun(
        "neuromas_v3_directions.log",
        "neuromas_v3_directions.json",
        "NeuroMAS v3 on Text2SQL: direction words and constrained decoding",
        "The v3 recipes above, trained on twelve schemas instead of ten: `logistics` (parcels picked "
        "up in one city and delivered to another) and `rail` (trains departing one city and arriving "
        "in another) each have two columns holding the same cities, told apart only by direction "
        'words ("from", "sent to", "departing", "arriving at"). Teams are scored as `orchestrl ask` '
        "decodes: constrained, the WHERE column one the question names a stored value of (any column "
        "when it holds a number), the value the best-scored span that fits it, a text column's "
        "operator = or !=. `free decoding`: the same team, each action component's own argmax.",
        "neuromas5_every monolithic_every neuromas5_every_es monolithic_every_es neuromas5_every_es_rl",
    ),
    NeuromasRerun(
        "neuromas_v3_language.log",
        "neuromas_v3_language.json",
        "NeuroMAS v3 on Text2SQL: comparatives as people write them",
        "The section above's schemas and decoding, with the training grammar's comparatives "
        'rebalanced: "no more than" (<=) had been twice as frequent as "more than" (>), and teams '
        'read "more than 150 seats" on the hand-written dev questions as < 150. Plain comparatives now '
        "outnumber their negations (`test_a_comparative_means_what_it_says_more_often_than_its_negation`).",
        "neuromas5_every monolithic_every monolithic_every_es neuromas5_every_es_rl",
    ),
    NeuromasRerun(
        "neuromas_v3_contextual.log",
        "neuromas_v3_contextual.json",
        "NeuroMAS v3 on Text2SQL: contextual states, dev-set early stopping and the group baseline",
        "The section above's data and decoding, five seeds. Question words are read as the frozen "
        "MiniLM's contextual states (each word in its sentence, encoded one question at a time and "
        "cached) instead of its static piece vectors; the monolith is widened to NeuroMAS-7's live "
        "parameters with the same encoder. `early stopping on validation and dev questions`: cloning "
        "keeps the epoch with the best mean agreement over the validation split and the 30 "
        "hand-written dev questions (`tests/data/text2sql_natural_dev.jsonl`, validation schemas; the "
        "75 test questions are never used). `group baseline`: each training question is posed 4 times "
        "running and each sampled query scored against the other three (leave-one-out), with as many "
        "env steps as the critic's RL phase. The shipped config (`configs/neuromas_text2sql.yaml`) is "
        "the last row.",
        "neuromas5_every_ctx monolithic_every_ctx neuromas5_every_ctx_esdev_rl "
        "neuromas5_every_ctx_esdev_group_rl",
        seeds=5,
    ),
    NeuromasRerun(
        "neuromas_v3_esdev_controls.log",
        "neuromas_v3_esdev_controls.json",
        "NeuroMAS v3 on Text2SQL: the network and the monoliths cloned to the same early stopping",
        "The section above's data, decoding and contextual states, five seeds. The shipped recipe's "
        "clone (NeuroMAS-5, early stopping on the mean agreement over the validation split and the 30 "
        "dev questions, then the budget's 2 PPO iterations like every variant without a measured RL "
        "phase) against the contextual monolith widened to NeuroMAS-7's live parameters and cloned to "
        "the same early stopping, and against the same monolith applying its neuron five times "
        "(compute-matched). In the section above the monolith cloned for 12 epochs and the network "
        "it met too.",
        "neuromas5_every_ctx_esdev monolithic_every_ctx_esdev monolithic_compute_ctx_esdev",
        seeds=5,
        produced_by=(
            "python benchmarks/neuromas.py --variants neuromas5_every_ctx_esdev "
            "monolithic_every_ctx_esdev --seeds 5 2> benchmarks/logs/neuromas_v3_esdev_controls.log",
            "python benchmarks/neuromas.py --variants monolithic_compute_ctx_esdev --seeds 5 --jobs 1 "
            "2>> benchmarks/logs/neuromas_v3_esdev_controls.log",
        ),
    ),
    NeuromasRerun(
        "neuromas_v3_longer_rl.log",
        "neuromas_v3_longer_rl.json",
        "NeuroMAS v3 on Text2SQL: the shipped recipe with four times the RL phase (pilot, 2 seeds)",
        "The shipped recipe with 64 PPO iterations instead of 16 (the same learning rate, anchor and "
        "group baseline), scored every 16 iterations on what RL samples (training questions), on the "
        "validation split and on the 30 dev questions; the 75 test questions only at the end. Cloning "
        "continued gets the longer RL phase's wall time; the runs shared the 2 cores with up to four other "
        "training processes, which stretched that wall time (CPU minutes are the process's own).",
        "neuromas5_every_ctx_esdev_group_rl",
        seeds=2,
        flags="--rl-iterations 64 --rl-curve 16",
        labels=(
            (
                "neuromas5_every_ctx_esdev_group_rl",
                "the shipped recipe (contextual, early stopping on validation and dev questions, "
                "group-baseline RL), 64 PPO iterations",
            ),
        ),
    ),
    NeuromasRerun(
        "neuromas_v3_reinstall.log",
        "neuromas_v3_reinstall.json",
        "NeuroMAS v3 on Text2SQL: the shipped recipe after a reinstall",
        'The shipped recipe, with the code and data of the section "contextual states, dev-set early '
        'stopping and the group baseline", five seeds, rerun in a later session on a reinstalled '
        "environment (torch 2.13.0, numpy 2.4.6, pandas 3.1.1, ray 2.60.0, transformers 5.25.0, "
        "sentence-transformers 6.3.0; the earlier install's versions were not recorded). Within one "
        "install a seed's run repeats (two `--quick` runs gave the same figures, but for cloning "
        "continued, which runs for a wall time); across the two installs the same seeds clone for "
        "other numbers of epochs and end elsewhere. The spread between this section and that one is "
        "what a reinstall adds to a seed's figures. Seeds 0-3 ran one after another beside the "
        "level-4 credit runs, seed 4 beside seed 3; CPU minutes are each run's own.",
        "neuromas5_every_ctx_esdev_group_rl",
        seeds=5,
        produced_by=(
            "python benchmarks/neuromas.py --variants neuromas5_every_ctx_esdev_group_rl --seeds 4 "
            "--jobs 1 2> benchmarks/logs/neuromas_v3_reinstall.log",
            "python benchmarks/neuromas.py --variants neuromas5_every_ctx_esdev_group_rl --first-seed 4 "
            "--seeds 1 --jobs 1 2>> benchmarks/logs/neuromas_v3_reinstall.log  # at once with the "
            "first's seed 3, to its own log (joined here)",
        ),
        labels=(
            (
                "neuromas5_every_ctx_esdev_group_rl",
                "the shipped recipe (contextual, early stopping on validation and dev questions, "
                "group-baseline RL), after a reinstall",
            ),
        ),
    ),
)


def neuromas_rerun_part(rerun: NeuromasRerun) -> list[str]:
    result = neuromas_result(rerun.log, rerun.saved)
    if result is None:
        return []
    out = [
        f"## {rerun.title}",
        "",
        rerun.intro,
        "",
        *commands(
            "Produced by",
            list(rerun.produced_by)
            or [
                f"python benchmarks/neuromas.py --variants {rerun.variants} --seeds {rerun.seeds} "
                f"{rerun.flags + ' ' if rerun.flags else ''}2> benchmarks/logs/{rerun.log}"
            ],
        ),
        "",
        *commands(
            "Summarised by",
            [
                f"python benchmarks/neuromas.py --summarise benchmarks/logs/{rerun.log}"
                f"{' ' + rerun.flags if rerun.flags else ''} > benchmarks/results/{rerun.saved}"
            ],
        ),
        "",
    ]
    table_lines = neuromas_v3_table(result, {**VARIANT_LABELS, **dict(rerun.labels)})
    return [*out, *table_lines, *environment_lines(result["environments"]), ""]


# --- mappo on simple_spread against the clock (benchmarks/spread_wallclock.py) -------------------

SPREAD_LOG = "spread_wallclock.log"


def load_text(runs: dict[int, dict[str, Any]]) -> str:
    """The machine's 1-minute load average before the runs, as logged (older lines lack it)."""
    loads = [r["load_avg_1_before"] for r in runs.values() if "load_avg_1_before" in r]
    if len(loads) < len(runs):
        return "shared with other jobs"
    return f"1-minute load average before each run {min(loads):.1f}-{max(loads):.1f}"


def spread_wallclock_part() -> list[str]:
    if not (LOGS / SPREAD_LOG).is_file():
        return []
    wallclock = sibling("spread_wallclock")
    runs, budget, sets = wallclock.read_runs([LOGS / SPREAD_LOG])
    peer_runs = wallclock.read_peer_runs([LOGS / SPREAD_LOG])
    r = wallclock.report(runs, budget, {}, sets, peer_runs or None)
    sides = [r, r["peer"]] if peer_runs else [r]

    def reached(side: dict[str, Any]) -> str:
        t = side["seconds_to_minus_60"]
        return "never" if side["never_reached"] == side["seeds"] else f"{t['iqm']:.1f} s {ci(t['ci95'], 1)}"

    def per_seed(side: dict[str, Any]) -> str:
        values = side["per_seed_seconds_to_minus_60"].values()
        return ", ".join("never" if v is None else f"{v:.1f} s" for v in values)

    def at(side: dict[str, Any], mark: str) -> str:
        v = side["return_at_seconds"].get(mark)
        return "-" if v is None else f"{v['iqm']:.1f} {ci(v['ci95'], 1)}"

    rows = [[f"{mark} s", *(at(side, mark) for side in sides)] for mark in r["return_at_seconds"]]
    rows.append(
        [
            f"end of the budget ({budget:g} s)",
            *(f"{s['final_return']['iqm']:.1f} {ci(s['final_return']['ci95'], 1)}" for s in sides),
        ]
    )
    rows.append([f"seconds to {wallclock.THRESHOLD:g}", *(reached(s) for s in sides)])
    rows.append(["env steps/s of training", *(f"{s['env_steps_per_s']['iqm']:,.0f}" for s in sides)])
    header = ["training time", "orchestrl mappo: greedy team return, IQM [95% CI]"]
    if peer_runs:
        p = r["peer"]["settings"]
        ends = [run["curve"][-1][0] for run in peer_runs.values()]
        header.append("BenchMARL mappo")
        peer_text = [
            f"Beside it, in the same log: **BenchMARL {p['algorithm']}** on PettingZoo's "
            "`simple_spread_v3` (the same N, episode length and local_ratio, discrete actions, one "
            f"torch thread), seeds {seed_range(r['peer']['seeds'])}, each for the same training "
            f"wall time, timed the same way (`benchmarks/peers/benchmarl_spread.py`, run by "
            "`spread_wallclock.py` under `make peers`' environment). Its settings are BenchMARL's "
            f"published defaults ({p['frames_per_batch']:,} frames per batch, lr {p['lr']:g}, "
            f"gamma {p['gamma']:g}), not tuned for this budget as orchestrl's were; a greedy "
            "evaluation ends every one of its iterations, and a run stops at the first one past the "
            f"budget (its last came after {min(ends):.0f}-{max(ends):.0f} s of training, so its "
            "end-of-budget row had more training than mappo's). Seconds to "
            f"{wallclock.THRESHOLD:g} per seed: {per_seed(r['peer'])}.",
        ]
    else:
        peer_text = ["No BenchMARL runs in the log (`make peers` installs the peer)."]
    overrides = " ".join(f"--set {k}={v}" for k, v in sets.items())
    settings = f" with `{overrides}`" if overrides else ""
    first_seed = f"--first-seed {r['seeds'][0]} " if r["seeds"][0] else ""
    return [
        "## mappo on simple_spread against the clock",
        "",
        f"`benchmarks/spread_wallclock.py`: `{r['settings']['config']}`{settings} (mappo on "
        "`simple_spread_batched`, N=3, 25-step episodes, every copy on the driver's env runner), "
        f"seeds {seed_range(r['seeds'])}, each trained for {budget:g} s of `train()` wall time, in one "
        f"process on a 2-core machine ({load_text(runs)}). After every iteration the greedy policy "
        f"plays {r['settings']['eval_episodes']} episodes (not counted as training time, nor are Ray's "
        "start-up and building the algorithm). Returns are team returns (summed over the 3 agents).",
        "",
        f"- Training seconds until the greedy return first reaches {wallclock.THRESHOLD:g}: "
        f"**{reached(r)}** (IQM [95% CI]; a seed that never reaches it counts as the budget); per seed: "
        f"{per_seed(r)}.",
        f"- Training throughput: {r['env_steps_per_s']['iqm']:,.0f} env steps/s "
        f"{ci(r['env_steps_per_s']['ci95'], 0)}; building the algorithm {r['build_s']['iqm']:.1f} s; "
        f"one greedy evaluation {r['eval_s_per_evaluation']:.2f} s.",
        "",
        *peer_text,
        "",
        *table(header, rows),
        "",
        *commands(
            "Produced by",
            [
                f"python benchmarks/spread_wallclock.py {overrides + ' ' if overrides else ''}"
                f"{first_seed}--log benchmarks/logs/{SPREAD_LOG}"
            ],
        ),
        "",
        *commands(
            "Summarised by (what this section shows)",
            [f"python benchmarks/spread_wallclock.py --summarise benchmarks/logs/{SPREAD_LOG}"],
        ),
        "",
        *commands("Other settings", ["python benchmarks/spread_wallclock.py --quick   # 2 seeds, 20 s each"]),
        "",
    ]


# --- saved JSON outputs --------------------------------------------------------------------------


IDLE_LOAD = 0.5
"""A 1-minute load average below this before a run: nothing else was running."""


def load_note(*loads: list[float] | float | None) -> str:
    values = [v[0] if isinstance(v, list) else v for v in loads if v is not None]
    shown = [f"{v:.1f}" for v in values]
    idle = bool(values) and values[0] < IDLE_LOAD
    return (
        "Recorded on the 2-core development machine "
        + ("with nothing else running" if idle else "while other jobs shared it")
        + (f" (1-minute load average {' → '.join(shown)})" if shown else "")
        + ": absolute rates move with the load."
    )


def sandbox_section(d: dict[str, Any]) -> list[str]:
    levels = d["counterfactual_levels"]
    rows = [
        ["full level-2 executions per core-second, uncached", num(d["uncached_executions_per_s"], 1)],
        ["the same per wall-clock second", num(d["uncached_executions_per_s_wall"], 1)],
        [
            "the same with a fresh process per job (no certificate)",
            num(d["uncached_executions_per_s_fresh_process"], 1),
        ],
        ["CPU a fork costs per execution", f"{d['fresh_process_cost_ms']:.1f} ms"],
        *(
            [
                f"cached single-edit counterfactual re-executions, {name.replace('_', ' ')}: "
                "speedup over uncached",
                f"{lv['speedup']:.2f}× ({lv['nodes_rerun_share']:.2f} of the nodes re-run)",
            ]
            for name, lv in levels.items()
        ),
        ["pool memory, PSS / RSS", f"{d['pool_pss_mb']:.0f} / {d['pool_rss_mb']:.0f} MB"],
        ["processes left after close", str(d["processes_left_after_close"])],
        [
            "cost model: a plain filter per row; normalising a text column / parsing messy numbers, "
            "in filters",
            f"{d['cost_model']['filter_us_per_row']:.2f} µs; "
            f"{d['cost_model']['medium_text_vs_filter']:.2f} / "
            f"{d['cost_model']['large_numbers_vs_filter']:.2f}",
        ],
    ]
    caps = d["capabilities"]
    names = {
        "pid_namespace": "PID namespace",
        "network_namespace": "network namespace",
        "chroot": "chroot",
        "own_uid": "own uid",
    }
    layers = [label for key, label in names.items() if caps.get(key)]
    return [
        "One sandbox worker; the caller waits for each result, so one core's worth of work.",
        "",
        *table(["measure", "value"], rows),
        "",
        f"Isolation in force: {', '.join(layers) or 'none'}{' (as root)' if caps.get('root') else ''}.",
        "",
        load_note(d.get("loadavg")),
    ]


def task_store_section(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            level,
            f"{v['generate_ms']:,.0f} ms",
            f"{v['load_ms']:.1f} ms",
            f"{v['speedup']:.0f}×",
            f"{v['kb_per_task']:.0f} KB",
        ]
        for level, v in d["levels"].items()
    ]
    return [
        f"{d['tasks_per_level']} training tasks per level, generated from scratch, then read back.",
        "",
        *table(["level", "generate a task", "read it back", "speedup", "on disk per task"], rows),
        "",
        load_note(d.get("load_avg_1_5_15_before"), d.get("load_avg_1_5_15_after")),
    ]


def throughput_section(d: dict[str, Any]) -> list[str]:
    rows = [["raw env, random actions, one core", num(d["raw_env_steps_per_s"], 0), "", ""]]
    for algo, label in (
        ("plain_ppo", "plain RLlib PPO (its default module)"),
        ("ippo", "ippo"),
        ("mappo", "mappo"),
    ):
        settings = ", ".join(f"{k}: {v:,.0f}" for k, v in d["by_setting"][algo].items())
        ratio = "1" if algo == "plain_ppo" else f"{d[f'{algo}_vs_plain_ppo']:.2f}"
        rows.append([f"{label}, best setting", num(d[f"{algo}_env_steps_per_s"], 0), ratio, settings])
    batched = "batched_mappo_env_steps_per_s" in d
    if batched:
        plain = d["plain_ppo_env_steps_per_s"]
        rows += [
            [
                "batched env alone (`simple_spread_batched`), random actions, all copies",
                num(d["batched_raw_env_steps_per_s"], 0),
                "",
                "",
            ],
            [
                "mappo on the batched env, sampled in bulk (`BatchedEnvRunner`)",
                num(d["batched_mappo_env_steps_per_s"], 0),
                f"{d['batched_vs_plain_ppo']:.2f}",
                ", ".join(f"{k}: {v:,.0f}" for k, v in d["by_setting"]["batched_mappo"].items()),
            ],
            [
                "mappo on the batched env through RLlib's per-copy sampling loop",
                num(d["batched_rllib_stepping_env_steps_per_s"], 0),
                f"{d['batched_rllib_stepping_env_steps_per_s'] / plain:.2f}",
                ", ".join(f"{k}: {v:,.0f}" for k, v in d["by_setting"]["batched_rllib_stepping"].items()),
            ],
        ]
    rows.append(["peak RSS, driver and all Ray workers", f"{d['peak_rss_mb'] / 1024:.2f} GB", "", ""])
    out = [
        f"MPE simple_spread, N={d['env_kwargs']['N']}; whole training iterations (sampling and "
        f"learning), median of {d['timed_iterations']} timed iterations, at each setting of env runners "
        "× sub-envs per runner; the best setting is reported.",
        "",
        *table(["", "env steps/s", "over plain PPO", "per setting (runners × sub-envs)"], rows),
        "",
    ]
    if batched:
        b = d["batched_settings"]
        mappo = d["by_setting"]["mappo"]
        vector = next(k for k in mappo if k.startswith("1x") and k != "1x1")
        out += [
            f"The batched rows run {b['envs_per_env_runner']} copies on the driver's env runner "
            f"({b['env_runners']} remote runners), {b['train_batch_size']:,} env steps an iteration, "
            f"{b['num_epochs']} epochs of {b['minibatch_size']:,}-row minibatches, "
            f"{d['torch_threads']} torch thread(s): `BATCHED` in `benchmarks/throughput.py`, chosen for "
            "throughput (`configs/mappo_simple_spread.yaml` trades some for more updates). RLlib's own "
            f"vectorisation of the Python env (mappo, one runner, {vector} sub-envs against 1x1): "
            f"`vector_python_vs_single` = {d['vector_python_vs_single']:.2f}.",
            "",
        ]
    return [
        *out,
        load_note(d.get("load_avg_1_5_15_before"), d.get("load_avg_1_5_15_after"))
        if "load_avg_1_5_15_before" in d
        else "Recorded while other jobs loaded the 2-core development machine heavily (the JSON records "
        "no load average): compare the ratios, not the rates, and rerun `make bench` on an idle "
        "machine for rates.",
    ]


def learner_step_section(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            algo,
            f"{v['update_s']['rllib']:.2f} s",
            f"{v['update_s']['fast']:.2f} s",
            f"{v['speedup']:.2f}×",
            f"{v['apply_gradients_ms']['rllib']:.1f} → {v['apply_gradients_ms']['fast']:.1f} ms",
            "yes" if v["weights_equal"] else "NO",
        ]
        for algo, v in d.items()
        if algo != "meta"
    ]
    meta = d["meta"]
    return [
        "One level-4 PPO update (the credit benchmark's settings), median over the repeats:",
        "",
        *table(
            ["algorithm", "RLlib's step", "fast step", "speedup", "optimizer step per call", "weights equal"],
            rows,
        ),
        "",
        load_note(meta.get("load_avg_1_5_15_before"), meta.get("load_avg_1_5_15_after")),
    ]


def tracking_outage_section(d: dict[str, Any]) -> list[str]:
    w = d["write_ms"]
    rows = [
        ["server up, no journal", f"{w['direct_up']['median']:.1f} ms", f"{w['direct_up']['cpu_ms']:.2f} ms"],
        [
            "server up, through the journal",
            f"{w['journal_up']['median']:.1f} ms",
            f"{w['journal_up']['cpu_ms']:.2f} ms",
        ],
        [
            "the journal's own bookkeeping (a send that does nothing)",
            f"{d['journal_bookkeeping_us'] / 1000:.3f} ms",
            "",
        ],
        [
            "server stopped: the first write / the next ones",
            f"{w['first_write_after_stop_ms']:.1f} ms / {w['journal_refused']['median']:.3f} ms",
            f"{w['journal_refused']['cpu_ms']:.2f} ms",
        ],
        [
            "server frozen (SIGSTOP): the first write / the next ones",
            f"{w['first_write_after_freeze_ms'] / 1000:.1f} s / {w['journal_frozen']['median']:.3f} ms",
            f"{w['journal_frozen']['cpu_ms']:.2f} ms",
        ],
    ]
    out = [
        f"{w['direct_up']['n']} writes of one iteration's curated metrics per phase, against a real "
        "`mlflow server` on 127.0.0.1.",
        "",
        *table(["phase", "median per write", "CPU per write"], rows),
        "",
        f"Once the server answered again, the {w['drain']['writes']} queued writes reached it in "
        f"{w['drain']['s_after_ready']:.1f} s ({w['drain_after_thaw']['writes']} in "
        f"{w['drain_after_thaw']['s']:.1f} s after the freeze); every step arrived in order and once: "
        f"{'yes' if w['journal_run_steps_in_order_once'] else 'NO'}.",
    ]
    if "train_iteration_s" in d:
        t = d["train_iteration_s"]
        out += [
            "",
            f"A tiny `orchestrl train` run: median {t['server_up']:.2f} s an iteration with the server up, "
            f"{t['server_down_from_iteration_3']:.2f} s with it stopped from iteration 3 on.",
        ]
    return [*out, "", load_note(d.get("load_avg_1m_at_start"), d.get("load_avg_1m_at_end"))]


def serve_section(d: dict[str, Any]) -> list[str]:
    lat = d["latency_ms"]
    return [
        f"`{d['endpoint']}`, team: {d['team']}, {d['agents']} agents, {d['replicas']} replica, "
        f"{d['clients']} keep-alive HTTP clients on 127.0.0.1: {d['requests']:,} requests, "
        f"{d['requests_per_s']:,.0f} requests/s, latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, "
        f"{d['errors']} errors, {d['mismatches']} of the first {d['checked']} answers different from the "
        "policy acting in process.",
        "",
        load_note(d["loadavg"]["before"], d["loadavg"]["after"]),
    ]


def serve_faults_section(d: dict[str, Any]) -> list[str]:
    def phase(p: dict[str, Any]) -> str:
        return f"{p['p50']:,.0f} / {p['p99']:,.0f} ms ({p['n']:,})" if p.get("n") else "none"

    rows = [
        [
            f"`POST {path}`",
            *(phase(d["latency_ms"][path][k]) for k in ("before", "during", "after")),
        ]
        for path in ("/act", "/plan")
    ]
    soak = d["soak"]
    rss = [sample["rss_mb"] for sample in soak["rss_mb"]]
    in_flight = d["failed"] - d["failed_not_in_flight"]
    return [
        f"Team: {d['team']} on {d['replicas']} replicas, 127.0.0.1; `POST /act` paced at "
        f"{d['act_rate_per_s']:g} requests/s from {d['act_clients']} clients (answered: "
        f"{d['act_answered_per_s']:g}/s) and one `POST /plan` every "
        f"{d['plan_every_s']:g} s; one replica's process killed (SIGKILL) after "
        f"{d['killed']['after_s']:g} s. "
        "Every endpoint is idempotent, so a client retries a failed request (no answer, or 5xx) once.",
        "",
        f"- {d['sent']:,} requests sent, {d['answered_200']:,} answered 200, {d['failed']} failed after "
        f"the retry ({in_flight} in flight on the killed replica, **{d['failed_not_in_flight']} not**); "
        f"{d['first_try_failed']} first tries failed (statuses {d['first_try_failed_statuses']}, "
        f"{d['first_try_failed_in_flight_at_kill']} of them in flight at the kill), "
        f"{d['saved_by_retry']} answered on the retry.",
        f"- Recovery: {d['recovery_s']} s from the kill until Serve ran 2 replicas again.",
        f"- Soak: {soak['seconds']:g} s of `/act` paced at {soak['act_rate_per_s']:g} requests/s "
        f"(answered: {soak['act_answered_per_s']:g}/s) and a `/plan` every {soak['plan_every_s']:g} s: "
        f"{soak['requests']:,} requests, {soak['failed']} failed, `/act` p50 / p99 "
        f"{soak['latency_ms']['/act']['p50']:,.0f} / {soak['latency_ms']['/act']['p99']:,.0f} ms; "
        f"the replicas' RSS (with their sandbox workers) {rss[0]:,.0f} → {rss[-1]:,.0f} MB "
        f"(min {min(rss):,.0f}, max {max(rss):,.0f}), growth **{d['soak_rss_growth_mb']:+.1f} MB**.",
        f"- Processes: {d['processes_left']} of the {d['processes_seen']} replica and sandbox processes "
        "seen were alive after Ray stopped.",
        "",
        *table(["latency p50 / p99 (requests)", "before the kill", "during recovery", "after"], rows),
        "",
        load_note(d["loadavg_fault"]["before"], d["loadavg_fault"]["after"]),
    ]


def orchestration_env_section(d: dict[str, Any]) -> list[str]:
    ks = " / ".join(next(iter(d["levels"].values())).get("solver_success_at_k", {})) or "k"
    rows = []
    for level, v in d["levels"].items():
        rows.append(
            [
                f"{level} ({AGENTS[int(level)]})",
                f"{v['random_team_success']:.3f}",
                f"{v['solver_success']:.2f}",
                " / ".join(f"{x:.2f}" for x in v.get("solver_success_at_k", {}).values()) or "not measured",
                f"{1000 * v['solver_seconds_per_task']:.0f} ms, "
                f"{v['solver_executions_per_task']:.1f} sandbox runs",
                f"{v['multi_plan_share']:.2f} ({v['mean_successful_plans']:.1f})",
                f"{v['plan_space_size']:.0f} (≥ {v['plan_space_size_min']})"
                if "plan_space_size" in v
                else "—",
                f"{v['linear_probe_accuracy']:.3f} / {v['constant_baseline_accuracy']:.3f}",
            ]
        )
    s = d["settings"]
    return [
        f"Per level, {s['heldout_tasks']} held-out tasks, {s['random_teams']} uniformly random teams per "
        f"task, at most {s['plan_limit']} plans searched per task, the probe fit on {s['train_tasks']} "
        "training tasks.",
        "",
        *table(
            [
                "level (agents)",
                "random team success",
                "solver success",
                f"solver_k success, k = {ks} executions",
                "solver time per task",
                "tasks with ≥ 2 successful plans (mean plans)",
                "plans in the search's space, median (smallest)",
                "linear probe / constant baseline accuracy",
            ],
            rows,
        ),
        "",
        "`solver_k` is the same search stopped after k sandbox executions (the first plan that held "
        "every example row, else the one that held the most): the baseline for a team allowed k "
        "scored executions.",
        "",
        "The linear probe maps one agent's first-round observation to the solver's action for that "
        "agent (all components right); the constant baseline is the most frequent training action. "
        "The observation holds public inputs only, with nothing of the solver's conclusions: no prior, "
        "no check of a candidate inside the plan the solver ranks first, every candidate list in "
        "canonical order (`tests/envs/orchestration/test_orchestration_public_inputs.py`). The "
        "search's space is the solver's enumeration (the skeleton filled with the proposed candidates, "
        "schema-pruned, plus stage moves), counted per task up to 100,000.",
        "",
        *probe_ablation_lines(d["levels"]),
        load_note(d.get("loadavg_start"), d.get("loadavg_end")),
    ]


PROBE_ABLATIONS = {
    "example_agreement": "without the candidates' agreement with the example rows",
    "names": "without their name matches with the target",
    "data_profile": "without the rest of their numbers (the data's profile)",
    "candidate_numbers": "without all their numbers",
    "candidates": "without the whole candidate block",
    "all_but_slot": "the agent's slot alone",
}


def probe_ablation_lines(levels: dict[str, Any]) -> list[str]:
    """What the linear probe reads: its accuracy refit without each part of the observation
    (``linear_probe_without``), for the levels that measured it."""
    rows = [
        [
            level,
            f"{v['linear_probe_accuracy']:.3f}",
            *(f"{v['linear_probe_without'][k]:.3f}" for k in PROBE_ABLATIONS),
        ]
        for level, v in levels.items()
        if "linear_probe_without" in v
    ]
    if not rows:
        return []
    return [
        "What the probe reads: the same probe refit with a part of the observation removed (the "
        "agent's whole action right, held-out agents). A part whose removal leaves the accuracy "
        "where it was is one the probe can do without: what it reads there, another part also holds.",
        "",
        *table(["level", "probe", *PROBE_ABLATIONS.values()], rows),
        "",
    ]


UNTRIED = "no plan run twice"

PAIR_NAMES = {"solver": "`solver_k`", "bc_only": "cloning continued", "cloned": "the cloned start"}


def paired_difference_lines(v: dict[str, Any]) -> list[str]:
    """A level's paired differences at k = 3 (``paired_differences_at_3``) that concern lemon, and
    the other teams against the solver, as a list."""
    lines = []
    for pair, r in v.get("paired_differences_at_3", {}).items():
        team_name, base = pair.split(" - ")
        if not team_name.startswith("lemon") and base != "solver":
            continue
        untried = team_name.endswith("_untried")
        a, b = (
            PAIR_NAMES.get(n.removesuffix("_untried"), n.removesuffix("_untried")) for n in (team_name, base)
        )
        how = f", {UNTRIED}" if untried else ""
        lines.append(f"- {a} minus {b}{how}: {r['difference']:+.2f} {ci(r['ci95'], 2)}")
    if not lines:
        return []
    return [
        "Paired differences at k = 3 (IQM over seeds minus IQM over seeds, or minus the solver's "
        "rate; 95% CI from the same draws of tasks, and of seeds where every kind ran the same "
        "seeds):",
        "",
        *lines,
    ]


def team_vs_search_section(d: dict[str, Any], round_reward: str = "answer") -> list[str]:
    def team(r: dict[str, Any]) -> str:  # over seeds and the tasks drawn, comparable with the solver's
        return f"{r['iqm']:.2f} {ci(r['ci95_with_tasks'], 2)}"

    def solver(r: dict[str, Any]) -> str:
        return f"{r['mean']:.2f} {ci(r['ci95'], 2)}"

    out: list[str] = []
    ks = ("1", "2", "3")
    for level, v in d["levels"].items():
        rows = []
        if "solver_success_at_k" in v:
            at = v["solver_success_at_k"]
            rows.append(
                [
                    "`solver_k` (k executions)",
                    *(solver(at[k]) for k in ks),
                    f"{v['solver_seconds_per_plan']:.2f} s",
                    "—",
                    "1",
                ]
            )
        if "random_success_at_k" in v:
            at = v["random_success_at_k"]
            rows.append(["a uniformly random team", *(solver(at[k]) for k in ks), "—", "—", "—"])
        if "cloned_success_at_k" in v:
            at = v["cloned_success_at_k"]
            rows.append(
                [
                    "the cloned start (cloning and DAgger, before RL)",
                    *(team(at[k]) for k in ks),
                    "—",
                    "—",
                    f"{v['cloned_agent_agrees_with_solver']:.2f}",
                ]
            )
            if "cloned_untried_success_at_k" in v:
                at = v["cloned_untried_success_at_k"]
                rows.append([f"the cloned start, {UNTRIED}", *(team(at[k]) for k in ks), "—", "—", "—"])
        for kind, label in (("lemon", "lemon"), ("ippo", "ippo"), ("bc_only", "cloning continued")):
            if f"{kind}_success_at_k" in v:
                at, seeds = v[f"{kind}_success_at_k"], v[f"{kind}_success_at_k"]["1"]["seeds"]
                executions = f"{v[f'{kind}_training_executions']:.0f}"
                if f"{kind}_expert_labelled_tasks" in v:  # the searches that labelled its new tasks
                    labels = (
                        f"{v[f'{kind}_expert_executions']:.0f} (the search's, labelling)"
                        if f"{kind}_expert_executions" in v
                        else f"the search's on {v[f'{kind}_expert_labelled_tasks']:.0f} tasks (labelling)"
                    )
                    executions = labels if kind == "bc_only" else f"{executions} + {labels}"
                cost = [
                    f"{v[f'{kind}_seconds_per_plan']:.2f} s",
                    executions,
                    f"{v.get(f'{kind}_agent_agrees_with_solver', float('nan')):.2f}",
                ]
                rows.append(
                    [f"{label} ({seeds} seed{'s' if seeds > 1 else ''})", *(team(at[k]) for k in ks), *cost]
                )
                if f"{kind}_untried_success_at_k" in v:
                    at = v[f"{kind}_untried_success_at_k"]
                    seconds = v.get(f"{kind}_untried_seconds_per_plan")
                    rows.append(
                        [
                            f"{label}, {UNTRIED}",
                            *(team(at[k]) for k in ks),
                            "—" if seconds is None else f"{seconds:.2f} s",
                            "—",
                            "—",
                        ]
                    )
        verdict = ""
        if "lemon_success_at_k" in v and "solver_success_at_k" in v:
            lemon, search = v["lemon_success_at_k"]["3"]["iqm"], v["solver_success_at_k"]["3"]["mean"]
            apart = " with CIs apart" if v.get("lemon_above_solver_at_3_cis_apart") else ""
            side = f"above{apart}" if lemon > search else "at" if lemon == search else "below"
            verdict = f" At k = 3 lemon scores {lemon:.2f}, {side} `solver_k`'s {search:.2f}"
            if "lemon_untried_success_at_k" in v:
                untried = v["lemon_untried_success_at_k"]["3"]["iqm"]
                apart = " (CIs apart)" if v.get("lemon_untried_above_solver_at_3_cis_apart") else ""
                verdict += f" ({untried:.2f}{apart} when no round re-runs a plan)"
            if "bc_only_success_at_k" in v:
                cloning = v["bc_only_success_at_k"]["3"]["iqm"]
                verdict += f"; cloning continued scores {cloning:.2f}"
            verdict += "."
        out += [
            f"**Level {level}** ({AGENTS[int(level)]} agents, {v['heldout_tasks']} held-out tasks)"
            + (
                f"; the full search the warm start clones spends {v['expert_executions_per_task']:.1f} "
                "executions per task."
                if "expert_executions_per_task" in v
                else "."
            )
            + verdict,
            "",
            *table(
                [
                    "",
                    "k = 1",
                    "k = 2",
                    "k = 3",
                    "seconds per plan (k = 3)",
                    "training executions",
                    "agents whose first action is the solver's",
                ],
                rows,
            ),
            "",
            *paired_difference_lines(v),
            *environment_lines(v.get("environments")),
        ]
    return [
        "Held-out success at the same number of scored executions: a team's answer after k rounds (one "
        "execution per round) against the solver's search stopped after k executions, on the same "
        "held-out tasks; each answers by the same rule, public feedback only (the first spec or plan "
        "that held every example row, else the one that held the most). Teams: IQM over seeds "
        "[95% bootstrap CI over seeds and held-out tasks together: each copy draws the tasks, the same "
        "for every kind, then each team's seeds, so it is comparable with the solver's interval over "
        "tasks]; "
        "the solver and the random team (every round, "
        "each agent's action drawn uniformly among those its mask allows): mean over tasks "
        "[95% bootstrap CI over tasks]. Every team has the same actor (each "
        "candidate duty scored given the role, `model.option_rows`) and starts from the solver cloned on "
        "the same training tasks, then DAgger rounds on them (the team plays, the solver labels); "
        "cloning continued goes on that way, on new tasks, as long as lemon trained. "
        + (
            "PPO rewards a round for how much it improved the team's answer (the env's "
            "`round_reward: answer`), so an episode's return is the score of the answer evaluated at "
            "k = 3; every kind of a level and seed starts from one stored clone (`warm_start.reuse`). "
            if round_reward == "answer"
            else "PPO rewarded a round for the score of the spec it ran (`round_reward: spec`). Seeds "
            "3 and 4 start every kind of a level from one stored clone (`warm_start.reuse`); the "
            "earlier seeds cloned once per kind, from the same expert episodes. "
        )
        + "Training executions are env rounds plus lemon's replays; the executions of the search whose "
        "answers are cloned (the warm start's, and cloning continued's) come on top, about the "
        "search's executions per task for every episode cloned."
        + (
            ' Rows marked "no plan run twice" are the same trained teams played so that no round '
            "re-runs a plan an earlier round ran: such a round plays the team's next most likely joint "
            "action instead (one agent's one choice changed, ranked by the policy's own probabilities; "
            "`TrainedPolicy.act_fresh`), as a search tries its next candidate."
            if any(k.endswith("_untried_success_at_k") for v in d["levels"].values() for k in v)
            else ""
        ),
        "",
        *out,
    ]


def team_name(checkpoint: str) -> str:
    """``experiment `name`, run `id`, iter_N`` of a checkpoint folder under ``experiments/``, or the
    Tune run of a curriculum trial's."""
    parts = Path(checkpoint).parts
    if "experiments" in parts:
        i = parts.index("experiments")
        return f"checkpoint `{parts[-1]}` of run `{parts[i + 2]}` of `{parts[i + 1]}`"
    return f"checkpoint of run `{parts[-5]}`"


def experiment_of(checkpoint: str | None) -> str:
    """The experiment a checkpoint under ``experiments/<name>/<run>/checkpoints/`` belongs to (the
    config of that name), ``lemon_planning`` when it does not say."""
    parts = Path(checkpoint).parts if checkpoint else ()
    return parts[parts.index("experiments") + 1] if "experiments" in parts else "lemon_planning"


def planning_section(d: dict[str, Any]) -> list[str]:
    def rate(r: dict[str, Any]) -> str:
        return f"{r['mean']:.2f} {ci(r['ci'], 2)}"

    rows = [
        [
            "the synthesiser (search on the public inputs, the user's words included, 1 execution)",
            rate(d["solver_success"]),
        ],
        ["every agent its list's first option", rate(d["first_option_team_success"])],
        ["every agent an option at random", rate(d["random_team_success"])],
    ]
    for name, team in d["teams"].items():
        for k, r in team["team_success_at_k"].items():
            rows.append([f"team {team.get('label', team_name(name))}, after {k} round(s)", rate(r)])
    return [
        f"The planning env's generated held-out tasks ({d['tasks']}, split `heldout`): the share whose "
        "output is the whole hidden wanted table [95% bootstrap CI over tasks]. A team spends one "
        "scored execution per round. How much one agent's first observation gives away: a linear "
        f"probe to its label (fit on {d['probe_tasks']} training tasks) gets the whole team's "
        f"decisions right on **{d['linear_probe_accuracy']:.2f}** of the held-out tasks "
        f"({d['linear_probe_agent_accuracy']:.2f} of agents); each agent's most frequent label, "
        f"**{d['constant_baseline_accuracy']:.2f}** ({d['constant_baseline_agent_accuracy']:.2f} of agents).",
        "",
        *table(["team", "success"], rows),
    ]


def mean_of(rows: list[dict[str, Any]], key: str) -> float:
    """The mean of ``key`` over ``rows`` (booleans count as 0/1)."""
    return sum(float(r[key]) for r in rows) / max(len(rows), 1)


def plan_section(d: dict[str, Any]) -> list[str]:
    rows, misses, cases = [], [], []
    for name, c in d.items():
        if not (isinstance(c, dict) and "corpus" in c):
            continue  # the corpora, in the benchmark's order
        cases += c["per_case"]
        rows.append(
            [
                f"`{c['corpus']}` ({name})",
                str(c["cases"]),
                f"{c['solver_exact']:.2f}",
                num(c.get("solver_exact_examples_only"), 2),
                f"{c['solver_holds_examples']:.2f}",
                num(c.get("team_exact"), 2),
                num(c.get("team_exact_examples_only"), 2),
                f"{c['seconds_per_case']:.1f} s",
            ]
        )
        missed = [r["case"] for r in c["per_case"] if not r["solver_exact"]]
        misses.append(f"- {name}: {', '.join(f'`{m}`' for m in missed) or 'none'}")
    levels = [[level, f"{v['env']:.2f}", f"{v['files']:.2f}"] for level, v in d["env_solver_success"].items()]
    return [
        "`orchestrl plan` on exports written by hand (not by the env's generator). The synthesiser was "
        "tuned while looking at the dev corpus and, each once it had been measured blind (its "
        "README keeps that figure), at eight earlier held-out corpora (seen to seen_h); the "
        "held-out corpus was written afterwards by someone who had not seen the planner. Its "
        "requests were later read, with every corpus's, while the reading of users' words was "
        'widened (bounds written "at or over the", yes/no columns named by their names), so its '
        "row is no longer a blind estimate for new exports. "
        "*Exact*: the plan's output is the whole wanted table, which `plan` never sees (it gets a "
        "few example rows and the case's description, the user's words, as `plan --description`); "
        "*examples only*: the same without the description. "
        "*Team exact*: a planning team's own spec (env `orchestration_planning`, "
        f"`configs/{experiment_of(d.get('checkpoint'))}.yaml`), given the same description, no "
        "fallback (*team, examples only*: without the description)"
        + (
            f" ({team_name(d['checkpoint'])}, "
            f"{d['heldout'].get('team_executions_per_case', 0):.0f} scored executions per case)."
            if d.get("checkpoint")
            else "; no team was measured."
        ),
        "",
        *table(
            [
                "corpus",
                "cases",
                "solver exact",
                "examples only",
                "holds the examples",
                "team exact",
                "team, examples only",
                "time per case",
            ],
            rows,
        ),
        "",
        *(
            [
                f"Over all {len(cases)} cases: solver exact **{mean_of(cases, 'solver_exact'):.2f}**, "
                f"examples only **{mean_of(cases, 'solver_exact_examples_only'):.2f}**, team exact "
                f"**{mean_of(cases, 'team_exact'):.2f}**"
                + (
                    f", team examples only **{mean_of(cases, 'team_exact_examples_only'):.2f}**."
                    if all("team_exact_examples_only" in r for r in cases)
                    else "."
                ),
                "",
            ]
            if cases and all("team_exact" in r for r in cases)
            else []
        ),
        "Cases whose plan is not exact:",
        "",
        *misses,
        "",
        f"Generated held-out tasks ({d['tasks_per_level']} per level), the synthesiser's success (its "
        "output equals the hidden target) on the env's in-memory tables and on the same tables after "
        f"a CSV round trip; the largest gap is **{d['env_vs_files_gap']:+.2f}**.",
        "",
        *table(["level", "in memory", "as CSV files"], levels),
    ]


@dataclass(frozen=True)
class Saved:
    file: str
    title: str
    produced: str
    reproduce: str
    render: Callable[[dict[str, Any]], list[str]]


SAVED = (
    Saved(
        "orchestration_env.json",
        "LEMON env calibration",
        "python benchmarks/orchestration_env.py --levels 1 2 3 4"
        " --out benchmarks/results/orchestration_env.json"
        "   # 2,000 probe tasks, 200 held-out tasks per level\n"
        "python benchmarks/orchestration_env.py --levels 5 --jobs 1 --update"
        " --out benchmarks/results/orchestration_env.json\n"
        "python benchmarks/orchestration_env.py --levels 3 4 --update"
        " --out benchmarks/results/orchestration_env.json"
        "   # levels 3-4 again, with the probe's ablations; the load note is this run's"
        " (levels 1, 2 and 5 ran beside other jobs)",
        "python benchmarks/orchestration_env.py --quick    # 60 probe tasks, 12 held-out tasks per level",
        orchestration_env_section,
    ),
    Saved(
        "team_vs_search.json",
        "LEMON team against search at equal executions",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 5 --log benchmarks/logs/team_vs_search.log\n"
        "python benchmarks/team_vs_search.py --levels 3 --seeds 5 --log benchmarks/logs/team_vs_search.log\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search.log"
        " --out benchmarks/results",
        "python benchmarks/team_vs_search.py --log benchmarks/logs/team_vs_search.log  # levels 3-5, 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "rl_cloning/team_vs_search.json",
        "LEMON team against search: RL and cloning alternated (pilot, level 4, 2 seeds)",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 2 --kinds lemon bc_only --rl-cloning-passes 2"
        " --log benchmarks/logs/team_vs_search_rl_cloning.log"
        "   # --out: the level-4 run's, whose stored clones it loaded\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_rl_cloning.log"
        " --out benchmarks/results/rl_cloning",
        "python benchmarks/team_vs_search.py --rl-cloning-passes 2"
        " --log benchmarks/logs/team_vs_search_rl_cloning.log  # levels 3-5, 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "untried/team_vs_search.json",
        "LEMON team against search: the same teams when no plan runs twice (pilot, level 4, 3 seeds)",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 3"
        " --log benchmarks/logs/team_vs_search_untried.log"
        "   # beside credit.py's level-4 runs for its first hour, then beside make test\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_untried.log"
        " --out benchmarks/results/untried",
        "python benchmarks/team_vs_search.py"
        " --log benchmarks/logs/team_vs_search_untried.log  # levels 3-5, 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "l4_36its/team_vs_search.json",
        "LEMON team against search: three times the PPO iterations (pilot, level 4, 2 seeds)",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 2 --kinds lemon bc_only --iterations 36"
        " --log benchmarks/logs/team_vs_search_l4_36its.log"
        "   # sharing the 2 cores with other jobs throughout (train_s doubled)\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_l4_36its.log"
        " --out benchmarks/results/l4_36its",
        "python benchmarks/team_vs_search.py --iterations 36"
        " --log benchmarks/logs/team_vs_search_l4_36its.log  # levels 3-5, 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "l4_36its_untried/team_vs_search.json",
        "LEMON team against search: three times the PPO iterations, and no plan run twice (level 4, 5 seeds)",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 3 --iterations 36"
        " --kinds solver random lemon bc_only --log benchmarks/logs/team_vs_search_l4_36its_untried.log"
        "   # make test shared the 2 cores with lemon's seeds 0-2 and cloning continued's seed 1\n"
        "python benchmarks/team_vs_search.py --levels 4 --seeds 5 --iterations 36"
        " --kinds lemon bc_only --log benchmarks/logs/team_vs_search_l4_36its_untried.log"
        "   # seeds 3-4; a probe script shared the cores with lemon's seeds 3-4"
        " and cloning continued's seed 3 for its first 5 minutes\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_l4_36its_untried.log"
        " --out benchmarks/results/l4_36its_untried",
        "python benchmarks/team_vs_search.py --iterations 36"
        " --log benchmarks/logs/team_vs_search_l4_36its_untried.log  # levels 3-5, 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "l4_36its_400tasks/team_vs_search.json",
        "LEMON team against search on 400 held-out tasks (level 4, 36 PPO iterations, 5 seeds)",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 2 --iterations 36 --heldout-tasks 400"
        " --kinds solver random lemon ippo bc_only --log benchmarks/logs/team_vs_search_l4_36its_400tasks.log"
        "   # beside it only a minute of unit tests, during the clones\n"
        "python benchmarks/team_vs_search.py --levels 4 --seeds 3 --iterations 36 --heldout-tasks 400"
        " --kinds lemon ippo bc_only --log benchmarks/logs/team_vs_search_l4_36its_400tasks.log"
        "   # seed 2\n"
        "python benchmarks/team_vs_search.py --levels 4 --first-seed 3 --seeds 1 --iterations 36"
        " --heldout-tasks 400 --kinds ippo --jobs 1"
        " --log benchmarks/logs/team_vs_search_l4_36its_400tasks.log"
        "   # ippo's seed 3, beside cloning continued's seed 2 (two runs at once, as --jobs 2 runs them)\n"
        "python benchmarks/team_vs_search.py --levels 4 --seeds 5 --iterations 36 --heldout-tasks 400"
        " --kinds lemon ippo bc_only --log benchmarks/logs/team_vs_search_l4_36its_400tasks.log"
        "   # the rest of seeds 3-4; cloning continued's seed 3 ran its last 15 minutes beside the level-5"
        " solver (two runs at once, as --jobs 2 runs them)\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_l4_36its_400tasks.log"
        " --out benchmarks/results/l4_36its_400tasks",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 5 --iterations 36 --heldout-tasks 400"
        " --log benchmarks/logs/team_vs_search_l4_36its_400tasks.log  # every kind and seed at once",
        team_vs_search_section,
    ),
    Saved(
        "l4_36its_400tasks_reinstall/team_vs_search.json",
        "LEMON team against search on 400 held-out tasks (level 4, 36 PPO iterations): seeds 0-1 again"
        " after a reinstall",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 2 --iterations 36 --heldout-tasks 400"
        " --kinds lemon ippo bc_only solver --jobs 2"
        " --log benchmarks/logs/team_vs_search_l4_36its_400tasks_reinstall.log"
        "   # the code of the 5-seed section, a later session's install; beside it only unit tests"
        " under nice 19 during lemon's and ippo's runs, and `make lint` during cloning continued's;"
        " lemon trained 741-744 s a seed (1,026-1,042 s"
        " in the 5-seed section's seeds 0-1), so cloning continued had that long\n"
        "python benchmarks/team_vs_search.py --summarise"
        " benchmarks/logs/team_vs_search_l4_36its_400tasks_reinstall.log"
        " --out benchmarks/results/l4_36its_400tasks_reinstall",
        "python benchmarks/team_vs_search.py --levels 4 --seeds 5 --iterations 36 --heldout-tasks 400"
        " --log benchmarks/logs/team_vs_search_l4_36its_400tasks_reinstall.log  # all 5 seeds",
        team_vs_search_section,
    ),
    Saved(
        "l5_36its_400tasks/team_vs_search.json",
        "LEMON team against search on 400 held-out tasks (level 5, 36 PPO iterations; pilot: seeds 0-2 of 5)",
        "python benchmarks/team_vs_search.py --levels 5 --seeds 1 --iterations 36 --heldout-tasks 400"
        " --kinds solver random --jobs 1 --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "   # beside cloning continued's level-4 seed 3\n"
        "python benchmarks/team_vs_search.py --levels 5 --seeds 1 --iterations 36 --heldout-tasks 400"
        " --kinds lemon --jobs 1 --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "   # at once with the next, each to its own log (joined here); make test beside the clone\n"
        "python benchmarks/team_vs_search.py --levels 5 --seeds 1 --iterations 36 --heldout-tasks 400"
        " --kinds ippo --jobs 1 --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log\n"
        "python benchmarks/team_vs_search.py --levels 5 --first-seed 1 --seeds 1 --iterations 36"
        " --heldout-tasks 400 --kinds lemon ippo --jobs 1"
        " --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "   # its clone beside NeuroMAS pilot runs; from there at once with the next, each to its own log\n"
        "python benchmarks/team_vs_search.py --levels 5 --first-seed 2 --seeds 1 --iterations 36"
        " --heldout-tasks 400 --kinds lemon --jobs 1"
        " --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log\n"
        "python benchmarks/team_vs_search.py --levels 5 --first-seed 2 --seeds 1 --iterations 36"
        " --heldout-tasks 400 --kinds ippo --jobs 1"
        " --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "   # beside a cloning-continued run of seed 1 (not finished, not logged)\n"
        "python benchmarks/team_vs_search.py --levels 5 --seeds 3 --iterations 36 --heldout-tasks 400"
        " --kinds bc_only --jobs 2 --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "   # seeds 0 and 1 at once, then seed 2; seed 0's clone re-run first; a one-minute test run"
        " beside seeds 0-1's start, a NeuroMAS run beside seed 2\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        " --out benchmarks/results/l5_36its_400tasks",
        "python benchmarks/team_vs_search.py --levels 5 --seeds 5 --iterations 36 --heldout-tasks 400"
        " --log benchmarks/logs/team_vs_search_l5_36its_400tasks.log"
        "  # the rest: lemon's, ippo's and cloning continued's seeds 3-4",
        team_vs_search_section,
    ),
    Saved(
        "spec_reward/team_vs_search.json",
        "LEMON team against search at equal executions, rewarded by the last spec (before)",
        "python benchmarks/team_vs_search.py --round-reward spec --levels 3 4 --seeds 3"
        " --log benchmarks/logs/team_vs_search_spec_reward.log\n"
        "python benchmarks/team_vs_search.py --round-reward spec --levels 3 4 --seeds 2 --first-seed 3"
        " --kinds lemon ippo bc_only --log benchmarks/logs/team_vs_search_spec_reward.log\n"
        "python benchmarks/team_vs_search.py --round-reward spec --levels 3 4 5 --kinds random"
        " --log benchmarks/logs/team_vs_search_spec_reward.log\n"
        "python benchmarks/team_vs_search.py --round-reward spec --levels 5 --seeds 3"
        " --log benchmarks/logs/team_vs_search_spec_reward.log"
        "   # stopped after the solver and lemon's seeds 0-1\n"
        "python benchmarks/team_vs_search.py --summarise benchmarks/logs/team_vs_search_spec_reward.log"
        " --out benchmarks/results/spec_reward",
        "python benchmarks/team_vs_search.py --round-reward spec"
        " --log benchmarks/logs/team_vs_search_spec_reward.log",
        functools.partial(team_vs_search_section, round_reward="spec"),
    ),
    Saved(
        "sandbox.json",
        "LEMON sandbox",
        "python benchmarks/sandbox.py --quick > benchmarks/results/sandbox.json",
        "python benchmarks/sandbox.py                      # more tasks, longer timing windows",
        sandbox_section,
    ),
    Saved(
        "task_store.json",
        "Task store",
        "python benchmarks/task_store.py --out /tmp/bench/task_store_out.json"
        " > benchmarks/results/task_store.json",
        "python benchmarks/task_store.py --levels 4 --tasks 100",
        task_store_section,
    ),
    Saved(
        "learner_step.json",
        "Learner step",
        "python benchmarks/learner_step.py --out /tmp/bench/learner_step_out"
        " > benchmarks/results/learner_step.json",
        "python benchmarks/learner_step.py --algos mappo --repeats 5",
        learner_step_section,
    ),
    Saved(
        "throughput.json",
        "Training throughput",
        "python benchmarks/throughput.py --quick > benchmarks/results/throughput.json",
        "python benchmarks/throughput.py                   # more timed iterations",
        throughput_section,
    ),
    Saved(
        "serve.json",
        "Serving",
        "python benchmarks/serve.py --quick > benchmarks/results/serve.json",
        "python benchmarks/serve.py                        # 4,000 requests",
        serve_section,
    ),
    Saved(
        "serve_faults.json",
        "Serving under faults",
        "python benchmarks/serve.py --faults | sed -n '/^{/,$p' > benchmarks/results/serve_faults.json"
        "   # Ray's log lines come first",
        "python benchmarks/serve.py --faults --soak-s 30   # a short soak",
        serve_faults_section,
    ),
    Saved(
        "plan.json",
        "Planning on users' exports",
        "python benchmarks/plan.py --tasks 10 --levels 1 2 --checkpoint <the checkpoint make demo prints>"
        " > benchmarks/results/plan.json",
        "python benchmarks/plan.py                         # levels 1-4, 20 generated tasks each",
        plan_section,
    ),
    Saved(
        "planning.json",
        "LEMON planning team",
        "python benchmarks/planning.py --tasks 150 --probe-tasks 600 --checkpoint <the checkpoint make"
        " demo prints, or those of orchestrl train configs/lemon_planning.yaml> --out"
        " benchmarks/results/planning.json",
        "python benchmarks/planning.py --quick             # 12 held-out tasks, 30 probe tasks",
        planning_section,
    ),
    Saved(
        "tracking_outage.json",
        "Tracking outage",
        "python benchmarks/tracking_outage.py | sed -n '/^{/,$p' > benchmarks/results/tracking_outage.json"
        "   # MLflow prints its run links on stdout first",
        "python benchmarks/tracking_outage.py --quick      # fewer writes, no train runs",
        tracking_outage_section,
    ),
)


def saved_part() -> list[str]:
    out: list[str] = []
    for s in SAVED:
        path = SAVED_DIR / s.file
        if not path.is_file():
            continue
        out += [f"## {s.title}", ""]
        out += s.render(json.loads(path.read_text()))
        out += [
            "",
            *commands(f"Produced by (saved as `benchmarks/results/{s.file}`)", [s.produced]),
            "",
            *commands("Other settings", [s.reproduce]),
            "",
        ]
    return out


# --- the document ---------------------------------------------------------------------------------

NOT_BENCHMARKED = (
    "## Not benchmarked",
    "",
    "No saved benchmark output covers the matrix game (`matrix_game`, exact counterfactuals: its "
    "checks are tests, `tests/algorithms/`), learning on MPE (`python benchmarks/credit.py --envs "
    "simple_spread` compares the algorithms on simple_spread; the speaker-listener and reference "
    "envs have no benchmark), scaling on a multi-node cluster (`benchmarks/scaling.py`), COMA's critic heads "
    "(`benchmarks/coma_heads.py`), or training through the `orchestrl train` / `sweep` / "
    "`curriculum` commands themselves (each prints its figures and logs them to MLflow; "
    "`orchestrl report` compares runs). Save a benchmark's output under `benchmarks/results/` and "
    "give it a section in `benchmarks/results.py` to publish it here.",
    "",
)


def render() -> str:
    """The text of ``benchmarks/RESULTS.md`` from the saved outputs."""
    lines = [
        "# Results",
        "",
        "Generated by `python benchmarks/results.py` (`make results`) from the saved benchmark "
        "outputs under `benchmarks/logs/` and `benchmarks/results/`; do not edit by hand. Every "
        "section names the command that produced its data and how to run it again. Interval "
        "estimates are IQMs with 95% stratified-bootstrap CIs over seeds "
        "(`orchestrl/tracking/stats.py`, seeded); all runs were on 2-core CPU machines.",
        "",
    ]
    lines += credit_part()
    lines += neuromas_part()
    lines += neuromas_v3_part()
    for rerun in NEUROMAS_RERUNS:
        lines += neuromas_rerun_part(rerun)
    lines += spread_wallclock_part()
    lines += saved_part()
    lines += list(NOT_BENCHMARKED)
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md is stale; write nothing")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.is_file() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run `make results`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
