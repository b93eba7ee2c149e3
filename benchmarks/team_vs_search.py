"""Does a LEMON team beat search at the same number of executions?

LEMON's claim is that a learned orchestrator plans better than a hand-written one at the same cost.
Here the cost is scored executions: a team round runs its spec once; ``solver_k`` (the solver's
best-first search, :func:`orchestrl.envs.orchestration.solver.search`, stopped after ``k``
executions, :func:`~orchestrl.envs.orchestration.solver.answer_at`) runs ``k`` plans. Per level
(``--levels``; the env's levels 3, 4 and 5 by default) and seed (``--seeds``), on the same
``--heldout-tasks`` held-out tasks:

- ``solver``: ``solver_success_at_k`` for k = 1..3 (and 5, 10, 50 for scale), with 95% bootstrap
  CIs over tasks; ``seconds_per_plan`` at k = 3; ``expert_executions_per_task``, what the full
  search the warm start clones spends per task (its budget is the level's ``solver.BUDGET``);
- ``random``: a uniformly random team (every round each agent's action drawn among those its mask
  allows), answered by the same rule: ``random_success_at_k`` with CIs over tasks;
- ``lemon`` and ``ippo`` (the independent-learner control): the solver cloned in (``warm_start``),
  then PPO for ``iterations * batch`` env steps on the training split, 3 rounds per episode, each
  round rewarded by how much it improved the team's answer (the env's ``round_reward="answer"``:
  the return is the score of the answer ``success_at_k`` evaluates; ``--round-reward spec``
  rewards the spec just run, as before), and with ``--rl-cloning-passes N`` N passes of cloning
  continued (below) after each PPO iteration, imitation alongside RL as in DAPG; the
  greedy team's ``team_success_at_k`` (its answer after k rounds, k = 1..3, chosen among its specs
  so far as ``solver_k`` chooses among its plans: the first that held every example row, else the
  one that held the most; ``last_round_success_at_k`` is round k's spec alone), ``training_executions``
  (env rounds plus lemon's counterfactual replays; the warm start's expert executions are
  ``expert_executions_per_task`` times its episodes, the same for every kind) and
  ``seconds_per_plan`` (one 3-round episode, inference and executions), and how often the greedy
  first-round action equals the solver's (``agent_agrees_with_solver``, per agent, the figure the
  env's linear probe reports; ``team_agrees_with_solver``, every agent at once); and the same team
  when no round re-runs a plan (``untried_success_at_k``, ``untried_seconds_per_plan``): a round
  whose greedy plan already ran plays the team's next most likely plan instead, as a search tries
  its next candidate (``TrainedPolicy.act_fresh``);
- ``bc_only``: the same warm start, then cloning continued (more episodes on new training tasks,
  played by the team when the warm start ran DAgger and labelled by the solver, an epoch on
  everything gathered after each few) for as long as that seed's ``lemon`` run trained: the
  fair-comparisons control for "RL added something cloning would not have". Its labels cost one
  full search per new task (``bc_only_expert_labelled_tasks``, and times
  ``expert_executions_per_task``, ``bc_only_expert_executions``; the same keys for a team kind
  whose RL is mixed with cloning). Its run also evaluates the cloned
  start before cloning on (``cloned_success_at_k``: ippo's modules after the warm start every kind
  runs).

The warm start (``--warm-episodes`` expert episodes cloned, then ``--dagger-rounds`` of DAgger on
the same tasks) and the actor (``model.option_rows``: each candidate duty scored given the role) are
the same for every kind: one clone per level and seed, kept under ``--out``'s cache
(``warm_start.reuse``) by the first kind that starts and loaded by the others.
Each trained team is kept as a policy folder (``TrainedPolicy.save``) under
``--out/teams/l{level}_{kind}_s{seed}``, so it can be evaluated again without training it again.

Each finished run prints one line (``team-vs-search-run [level, kind, seed, run]``, the run's
settings in it) and appends it to ``--log`` (one log per setting); a second invocation with the same
log trains only what is missing, and ``--summarise LOG ...`` rebuilds the report from logs alone.
The report, per level: each kind's ``success_at_k`` as the IQM over seeds of per-seed held-out
success, with a 95% stratified bootstrap CI over seeds (``ci95``, ``orchestrl.tracking.stats``) and
one over seeds and held-out tasks together (``ci95_with_tasks``), beside the solver's over tasks;
``*_cis_apart`` compares the latter two, which cover the same draws. ``paired_differences_at_3``:
each team minus the solver and the other teams at k = 3, paired on the tasks.

Run::

    .venv/bin/python benchmarks/team_vs_search.py --quick     # level 3, one seed, minutes
    .venv/bin/python benchmarks/team_vs_search.py --log benchmarks/logs/team_vs_search.log

It writes ``team_vs_search.json`` under ``--out`` (default ``runs/bench/team_vs_search``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_log

ROUNDS = 3
"""Rounds per team episode: one scored execution each, so k = 1..3 compares with ``solver_k``."""
AT_K = (1, 2, 3, 5, 10, 50)
TEAMS = ("lemon", "ippo", "bc_only")
KINDS = ("solver", "random", *TEAMS)
"""What runs: the search and the random team once per level (their figures vary over tasks, not
seeds), each team kind once per seed."""
TASK_POOL = 1000
RUN_LINE = "team-vs-search-run"


@dataclasses.dataclass(frozen=True)
class Settings:
    """One invocation's fixed budget (the same for every kind and seed)."""

    levels: tuple[int, ...]
    seeds: int
    heldout_tasks: int
    warm_episodes: int
    warm_epochs: int
    iterations: int
    batch: int
    """Env steps per PPO iteration (a multiple of ``ROUNDS``: whole episodes)."""
    lr: float = 5e-4
    dagger_rounds: int = 0
    """After cloning, rounds of DAgger on the same training tasks (``warm_start.dagger_rounds``):
    the team's own first rounds, often wrong, labelled by the solver, so it learns to revise a spec
    from the board."""
    option_rows: bool = True
    """The actor scores each candidate duty's row given the role it chose (``model.option_rows``),
    rather than reading the candidate lists through one MLP."""
    rl_cloning_passes: int = 0
    """After each PPO iteration of ``lemon`` and ``ippo``, this many passes of cloning continued
    (:class:`ContinuedCloning`): imitation of the solver's labels alongside the RL updates, as DAPG
    (Rajeswaran et al. 2018) augments the policy gradient with demonstrations. Its time counts in
    the run's ``train_s``, so ``bc_only`` clones on for as long; 0: RL alone."""
    round_reward: str = "answer"
    """What a round's reward improves (the env's ``round_reward``): the team's answer among its specs
    so far, chosen as it is evaluated (so the return is what ``success_at_k`` at k = 3 scores), or
    ``"spec"``, the spec just run."""


# PPO at credit.py's learning rate (5e-4) undid most of a level-4 warm start on 200 episodes; the
# full run clones 300 episodes, then two DAgger rounds on them, and steps PPO at a fifth of that rate.
FULL = Settings(
    levels=(3, 4, 5),
    seeds=5,
    heldout_tasks=60,
    warm_episodes=300,
    warm_epochs=8,
    iterations=12,
    batch=240,
    lr=1e-4,
    dagger_rounds=2,
)
QUICK = Settings(
    levels=(3,),
    seeds=1,
    heldout_tasks=6,
    warm_episodes=16,
    warm_epochs=3,
    iterations=1,
    batch=30,
    dagger_rounds=1,
)


# ------------------------------------------------------------------------------ one run
def experiment(settings: Settings, level: int, kind: str, seed: int, run_dir: Path) -> dict[str, Any]:
    """The experiment a team kind trains (``bc_only`` builds ippo's modules and never samples). Its
    warm start is kept in ``run_dir``'s cache (``warm_start.reuse``): the kinds of one level and
    seed start from one clone, made by whichever starts first."""
    return {
        "name": f"team_vs_search_l{level}_{kind}",
        "seed": seed,
        "run_dir": str(run_dir),
        "env": {
            "name": "orchestration",
            "kwargs": {
                "level": level,
                "rounds": ROUNDS,
                "task_pool": TASK_POOL,
                "round_reward": settings.round_reward,
            },
        },
        "algorithm": {"name": "ippo" if kind == "bc_only" else kind},
        "model": {"hidden": [256, 256], "option_rows": settings.option_rows},
        "warm_start": {
            "episodes": settings.warm_episodes,
            "epochs": settings.warm_epochs,
            "dagger_rounds": settings.dagger_rounds,
            "reuse": True,
        },
        "resources": {"env_runners": 0, "envs_per_env_runner": 4},
        "training": {"train_batch_size": settings.batch, **ppo_training(settings)},
    }


def ppo_training(settings: Settings) -> dict[str, Any]:
    """PPO's settings of every team (``credit.py``'s full run takes them too): ``settings.lr``, 8
    epochs over minibatches of at most 240 steps, no entropy bonus (it would only undo the clone)."""
    return {
        "lr": settings.lr,
        "num_epochs": 8,
        "minibatch_size": min(settings.batch, 240),
        "entropy_coeff": 0.0,
    }


def run(
    settings: Settings, level: int, kind: str, seed: int, run_dir: Path, clone_seconds: float = 0.0
) -> dict[str, Any]:
    """One run (in a worker process): the solver's figures, or one team trained and evaluated
    (its experiment's run dir: ``run_dir``)."""
    if kind == "solver":
        return solver_run(settings, level)
    if kind == "random":
        return random_run(settings, level)
    from credit import COST_KEYS, sample

    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.inprocess import InProcessTrainer

    started = time.perf_counter()
    ppo = build_ppo_config(validate_config(experiment(settings, level, kind, seed, run_dir)))
    trainer = InProcessTrainer(ppo)
    warm_s = time.perf_counter() - started
    steps, replays, train_s, labelled = 0, 0.0, 0.0, 0
    cloned: dict[str, Any] = {}
    try:
        if kind == "bc_only":  # the cloned start (the demonstrations every kind clones), then more
            cloned = team_evaluation(trainer, ppo, settings, level)
            train_s, labelled = continue_cloning(trainer, clone_seconds)
        else:
            cloning = ContinuedCloning(trainer) if settings.rl_cloning_passes else None
            for _ in range(settings.iterations):
                wall = time.perf_counter()
                episodes = sample(trainer.runner, settings.batch)
                steps += sum(len(ep) for ep in episodes)
                trainer.update(episodes)
                if cloning is not None:  # imitation alongside RL
                    for _ in range(settings.rl_cloning_passes):
                        cloning.step()
                train_s += time.perf_counter() - wall
                stat = trainer.runner.get_metrics().get(f"env/cf_{COST_KEYS['executions']}")
                replays += float(stat.peek()) if hasattr(stat, "peek") else 0.0
            labelled = cloning.labelled if cloning is not None else 0
        folder = run_dir / "teams" / f"l{level}_{kind}_s{seed}"
        evaluation = team_evaluation(trainer, ppo, settings, level, save_to=folder)
    finally:
        trainer.stop()
    return {
        **evaluation,
        **({"cloned": cloned} if cloned else {}),
        "env_steps": steps,
        "replay_executions": replays,
        "training_executions": steps + replays,
        "warm_start_s": warm_s,
        "train_s": train_s,
        "expert_labelled_tasks": labelled,
        "wall_s": time.perf_counter() - started,
    }


class ContinuedCloning:
    """Cloning continued, one pass at a time (:meth:`step`): each pass plays a twentieth of the warm
    start's episodes on training tasks not seen yet, with the team's own sampled actions when the
    warm start ran DAgger (the solver's the labels, as DAgger's rounds did) and the solver's
    otherwise, and clones one epoch on everything gathered so far (the warm start's batch size and
    learning rate). ``labelled``: the new training tasks the solver labelled, one full search each
    (executions the team's env rounds do not count)."""

    def __init__(self, trainer: Any) -> None:
        from orchestrl.algorithms.behaviour_cloning import SampledActions, configured_warm_start

        self.trainer = trainer
        self.hook = hook = configured_warm_start(trainer.config)
        self.chunk = max(1, hook.settings.episodes // 20)
        self.one_epoch = hook.settings.model_copy(update={"epochs": 1})
        self.modules = {mid: m.unwrapped() for mid, m in trainer.learner.module.items()}
        # the warm start cloned tasks hook.seed + 0 .. episodes - 1: the passes take the next ones
        self.first = hook.seed + hook.settings.episodes
        dagger = hook.settings.dagger_rounds
        self.player = SampledActions(self.modules, hook.agent_to_module) if dagger else None
        self.demos: dict[str, Any] | None = None
        self.passes = 0

    @property
    def labelled(self) -> int:
        return self.passes * self.chunk

    def step(self) -> None:
        """One pass, then the env runners get the new weights."""
        from orchestrl.algorithms.behaviour_cloning import clone_actors, expert_demonstrations

        hook = self.hook
        more = expert_demonstrations(
            hook.env_config, self.chunk, seed=self.first + self.passes * self.chunk, player=self.player
        )
        self.demos = more if self.demos is None else {a: self.demos[a].extended(more[a]) for a in self.demos}
        self.passes += 1
        clone_actors(self.modules, self.demos, hook.agent_to_module, self.one_epoch, hook.seed + self.passes)
        self.trainer.sync_weights()


def continue_cloning(trainer: Any, seconds: float) -> tuple[float, int]:
    """:class:`ContinuedCloning` passes for ``seconds`` (the last ends close to the budget); returns
    the seconds spent and the new training tasks the solver labelled."""
    cloning = ContinuedCloning(trainer)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        cloning.step()
    return time.perf_counter() - started, cloning.labelled


def team_evaluation(
    trainer: Any, ppo: Any, settings: Settings, level: int, save_to: Path | None = None
) -> dict[str, Any]:
    """The greedy team on held-out tasks 0 .. heldout_tasks-1: success after each round, and how
    often its first-round actions are the solver's; and the same team when no round re-runs a plan
    (``untried_success_at_k``: a round whose greedy plan already ran plays the team's next most
    likely plan, :meth:`~orchestrl.experiment.policy.TrainedPolicy.act_fresh`). With ``save_to``,
    the team is first written there as a policy folder (``TrainedPolicy.save``), so it can be
    evaluated again (``orchestrl evaluate``) without training it again."""
    from orchestrl.experiment.policy import TrainedPolicy

    policy = TrainedPolicy(
        module=trainer.learner.module,
        agents=dict(ppo.policy_mapping_fn.table),
        normalize_actions=bool(ppo.normalize_actions),
        clip_actions=bool(ppo.clip_actions),
    )
    if save_to is not None:
        policy.save(save_to)
    env = heldout_env(level, bool(ppo.env_config.get("agent_id_in_obs")))
    try:
        greedy = heldout_play(lambda obs, _: policy.act(obs), env, settings, agreement=True)
        untried = heldout_play(policy.act_fresh, env, settings, agreement=False)
    finally:
        env.close()
    return {
        **greedy,
        "untried_success_at_k": untried["success_at_k"],
        "untried_seconds_per_plan": untried["seconds_per_plan"],
    }


def random_run(settings: Settings, level: int) -> dict[str, Any]:
    """A uniformly random team on the held-out tasks: every round each agent's action is drawn
    uniformly among those its mask allows (each agent's space seeded once, so a run repeats),
    answered as the teams are."""
    from orchestrl.envs.spaces import MASK_KEY

    started = time.perf_counter()
    env = heldout_env(level, False)
    spaces = {a: env.raw_env.action_space(a) for a in env.raw_env.possible_agents}
    for i, space in enumerate(spaces.values()):
        space.seed(1000 + i)
    try:
        result = heldout_play(
            lambda obs, _: {a: spaces[a].sample(mask=o[MASK_KEY]) for a, o in obs.items()},
            env,
            settings,
            agreement=False,
        )
    finally:
        env.close()
    return {**result, "wall_s": time.perf_counter() - started}


def heldout_env(level: int, agent_id_in_obs: bool) -> Any:
    """The env of held-out tasks a team is evaluated on, as RLlib's runners build it."""
    from orchestrl.envs.rllib_env import RegisteredEnv, env_config

    kwargs = {"level": level, "rounds": ROUNDS, "split": "heldout"}
    return RegisteredEnv(env_config("orchestration", kwargs, agent_id_in_obs))


def heldout_play(act: Any, env: Any, settings: Settings, agreement: bool) -> dict[str, Any]:
    """``act`` (observations, fresh -> actions; ``fresh(actions)``: they write a plan not run yet
    in this episode, an invalid one only in its first round) on held-out tasks 0 ..
    heldout_tasks-1 of ``env``: success after each round, its answer after k rounds chosen as
    ``solver_k`` chooses, seconds per plan, and with ``agreement`` how often the first-round actions
    are the solver's (that search runs after the clock: it is not the team's cost)."""
    from orchestrl.algorithms.behaviour_cloning import expert_of
    from orchestrl.envs.orchestration.solver import answer_index

    per_round: list[list[float]] = []  # the spec of each round
    answers: list[list[float]] = []  # the answer after k rounds, chosen as solver_k chooses
    seconds: list[float] = []
    agree: list[list[bool]] = []  # per task, per agent: its first action is the solver's, whole
    for task in range(settings.heldout_tasks):
        started = time.perf_counter()
        obs, _ = env.reset(seed=task)
        hits, held, first = [], [], None
        ran: list[Any] = []  # the plans run so far (None: an invalid one)

        def fresh(actions: dict[str, Any], ran: list[Any] = ran) -> bool:
            plan = env.raw_env.plan_of(actions)
            return not ran if plan is None else plan not in ran

        for _ in range(ROUNDS):
            actions = act(obs, fresh)
            ran.append(env.raw_env.plan_of(actions))
            first = actions if first is None else first
            obs, _, _, _, infos = env.step(actions)
            info = next(i for i in infos.values() if "success" in i)
            hits.append(float(info["success"]))
            held.append(float(info["examples_held"]))
        per_round.append(hits)
        answers.append([hits[answer_index(held[:k])] for k in range(1, ROUNDS + 1)])
        seconds.append(time.perf_counter() - started)
        if agreement:
            expert = expert_of(env)()
            agree.append([bool(np.array_equal(first[a], expert[a])) for a in sorted(first)])
    table, chosen = np.array(per_round), np.array(answers)
    result = {
        "success_at_k": {str(k): chosen[:, k - 1].tolist() for k in range(1, ROUNDS + 1)},
        "last_round_success_at_k": {str(k): table[:, k - 1].tolist() for k in range(1, ROUNDS + 1)},
        "seconds_per_plan": float(np.mean(seconds)),
    }
    if agreement:
        agreed = np.array(agree)
        result["agent_agrees_with_solver"] = float(agreed.mean())
        result["team_agrees_with_solver"] = float(agreed.all(axis=1).mean())
    return result


def solver_run(settings: Settings, level: int) -> dict[str, Any]:
    """``solver_k`` on the held-out tasks: success per task at every k of :data:`AT_K`, seconds for
    k = 3, and the full search's executions per task (what the warm start clones)."""
    from orchestrl.envs.orchestration.env import OrchestrationEnv
    from orchestrl.envs.orchestration.solver import BUDGET, answer_at

    started = time.perf_counter()
    env = OrchestrationEnv(level=level, rounds=1, split="heldout")
    at_k: dict[str, list[float]] = {str(k): [] for k in AT_K}
    seconds, executions = [], []
    try:
        for task in range(settings.heldout_tasks):
            env.reset(seed=task)
            clock = time.perf_counter()  # first, while no node of this task is cached
            env.search_trace(ROUNDS)
            seconds.append(time.perf_counter() - clock)
            trace = env.search_trace(max(BUDGET[level], *AT_K))  # one search serves every k
            executions.append(min(len(trace), BUDGET[level]))  # what the solver itself spends
            scored: dict[int, float] = {}
            for k in AT_K:
                answer = answer_at(trace, k)
                if answer is not None and id(answer) not in scored:
                    scored[id(answer)] = env.evaluate(answer.spec).success
                at_k[str(k)].append(scored[id(answer)] if answer is not None else 0.0)
    finally:
        env.close()
    return {
        "success_at_k": at_k,
        "seconds_per_plan": float(np.mean(seconds)),
        "expert_executions_per_task": float(np.mean(executions)),
        "wall_s": time.perf_counter() - started,
    }


# ------------------------------------------------------------------------------ the report
def task_rate(values: list[float], seed: int = 0) -> dict[str, Any]:
    """Mean over tasks with a 95% bootstrap CI over tasks."""
    x = np.asarray(values, dtype=float)
    means = np.random.default_rng(seed).choice(x, size=(2000, len(x))).mean(1)
    return {
        "mean": float(x.mean()),
        "ci95": [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))],
    }


def seed_iqm(per_seed: list[float]) -> dict[str, Any]:
    """IQM over seeds of one value per seed, with its 95% stratified bootstrap CI."""
    from orchestrl.tracking.stats import aggregate

    agg = aggregate(per_seed, seed=0)
    return {"iqm": agg.iqm.value, "ci95": [agg.iqm.low, agg.iqm.high], "seeds": len(per_seed)}


def summarise(runs: dict[tuple[int, str, int], dict[str, Any]]) -> dict[str, Any]:
    """Per level: the solver's success at k, and each team kind's over its seeds."""
    out: dict[str, Any] = {}
    for level in sorted({lv for lv, _, _ in runs}):
        mine = {(kind, seed): r for (lv, kind, seed), r in runs.items() if lv == level}
        solver = next((r for (kind, _), r in mine.items() if kind == "solver"), None)
        entry: dict[str, Any] = {"heldout_tasks": len(next(iter(mine.values()))["success_at_k"]["1"])}
        if solver is not None:
            entry["solver_success_at_k"] = {k: task_rate(v) for k, v in solver["success_at_k"].items()}
            entry["solver_seconds_per_plan"] = solver["seconds_per_plan"]
            entry["expert_executions_per_task"] = solver["expert_executions_per_task"]
        random_team = next((r for (kind, _), r in mine.items() if kind == "random"), None)
        if random_team is not None:
            entry["random_success_at_k"] = {k: task_rate(v) for k, v in random_team["success_at_k"].items()}
        starts = [r["cloned"] for (kind, _), r in sorted(mine.items()) if kind == "bc_only" and "cloned" in r]
        if starts:
            put_success_at_k(entry, "cloned", starts)
            entry["cloned_agent_agrees_with_solver"] = float(
                np.mean([r["agent_agrees_with_solver"] for r in starts])
            )
        for kind in TEAMS:
            seeds = sorted(seed for (k, seed) in mine if k == kind)
            if not seeds:
                continue
            team = [mine[(kind, s)] for s in seeds]
            put_success_at_k(entry, kind, team)
            entry[f"{kind}_training_executions"] = float(np.mean([r["training_executions"] for r in team]))
            entry[f"{kind}_train_s"] = float(np.mean([r["train_s"] for r in team]))
            tasks = float(np.mean([r.get("expert_labelled_tasks", np.nan) for r in team]))
            if tasks > 0:  # the searches that labelled its new tasks
                entry[f"{kind}_expert_labelled_tasks"] = tasks
                if solver is not None:
                    entry[f"{kind}_expert_executions"] = tasks * solver["expert_executions_per_task"]
            for key in ("seconds_per_plan", "untried_seconds_per_plan"):
                if all(key in r for r in team):
                    entry[f"{kind}_{key}"] = float(np.mean([r[key] for r in team]))
            for key in ("agent_agrees_with_solver", "team_agrees_with_solver"):  # first round, greedy
                if all(key in r for r in team):
                    entry[f"{kind}_{key}"] = float(np.mean([r[key] for r in team]))
        put_shared_task_cis(entry, level, mine)
        entry["environments"] = run_log.environments(mine.values())
        if solver is not None and "lemon_success_at_k" in entry:
            search_k = entry["solver_success_at_k"][str(ROUNDS)]
            for name in ("lemon", "lemon_untried"):
                if f"{name}_success_at_k" in entry:
                    team = entry[f"{name}_success_at_k"][str(ROUNDS)]
                    entry[f"{name}_above_solver_at_3_cis_apart"] = (
                        team["ci95_with_tasks"][0] > search_k["ci95"][1]
                    )
        out[str(level)] = entry
    return out


def put_shared_task_cis(
    entry: dict[str, Any], level: int, mine: dict[tuple[str, int], dict[str, Any]]
) -> None:
    """Every kind of a level plays the same held-out tasks, so their intervals are also taken over
    the tasks (:func:`~orchestrl.tracking.stats.shared_task_bootstrap`: one draw of tasks for all,
    then each team's seeds): each team's ``ci95_with_tasks`` at every k, which, unlike its ``ci95``
    over seeds alone, is comparable with the solver's interval over tasks; and
    ``paired_differences_at_3``, each team's success at k = 3 (its IQM over seeds) minus
    ``solver_k``'s and minus the other teams' (greedy minus greedy, no plan run twice minus the
    same), with the interval of the differences taken on the same task draws, and on the same seed
    draws when every team kind ran the same seeds (a seed's kinds start from one clone)."""
    from orchestrl.tracking.stats import percentile_interval, shared_task_bootstrap

    played = {}  # row name -> (runs, tasks) successes at each k
    for (kind, _), r in sorted(mine.items()):
        for key, suffix in (("success_at_k", ""), ("untried_success_at_k", "_untried")):
            for name, run in ((kind, r), ("cloned", r.get("cloned"))):
                if run is not None and key in run:
                    played.setdefault(f"{name}{suffix}", []).append(run[key])
    tasks = {len(r[str(k)]) for rows in played.values() for r in rows for k in range(1, ROUNDS + 1)}
    if len(tasks) > 1:
        raise ValueError(
            f"level {level}: its runs played different numbers of held-out tasks {sorted(tasks)}"
        )
    seeds = {tuple(sorted(s for (kind, s) in mine if kind == team)) for team in TEAMS}
    paired = len(seeds - {()}) == 1  # every team kind ran the same seeds: pair them on seeds too
    for k in range(1, ROUNDS + 1):
        outcomes = {name: [r[str(k)] for r in rows] for name, rows in played.items()}
        values, copies = shared_task_bootstrap(outcomes, paired_runs=paired)
        for name in outcomes:
            if f"{name}_success_at_k" in entry and name not in ("solver", "random"):
                entry[f"{name}_success_at_k"][str(k)]["ci95_with_tasks"] = list(
                    percentile_interval(copies[name], 0.95)
                )
        if k != ROUNDS:
            continue
        pairs = [
            (team, base)
            for team in ("lemon", "ippo", "bc_only")
            for base in ("solver", "bc_only", "ippo", "cloned")
            if base != team and (team, base) != ("bc_only", "ippo")
        ]
        differences = {}
        for team, base in pairs:
            for suffix in ("", "_untried"):
                a, b = f"{team}{suffix}", base if base == "solver" else f"{base}{suffix}"
                if a in outcomes and b in outcomes:
                    differences[f"{a} - {b}"] = {
                        "difference": values[a] - values[b],
                        "ci95": list(percentile_interval(copies[a] - copies[b], 0.95)),
                    }
        if differences:
            entry["paired_differences_at_3"] = differences


def put_success_at_k(entry: dict[str, Any], name: str, runs: list[dict[str, Any]]) -> None:
    """``entry[name_success_at_k]``: the IQM over ``runs`` (one per seed) of held-out success at
    each k; ``name_untried_success_at_k`` too when every run played without re-running a plan
    (runs logged before that evaluation existed did not)."""
    for key in ("success_at_k", "untried_success_at_k"):
        if all(key in r for r in runs):
            entry[f"{name}_{key}"] = {
                str(k): seed_iqm([float(np.mean(r[key][str(k)])) for r in runs]) for k in range(1, ROUNDS + 1)
            }


def read_runs(logs: list[Path]) -> dict[tuple[int, str, int], dict[str, Any]]:
    """(level, kind, seed) -> run from the :data:`RUN_LINE` lines of ``logs`` (a later line wins)."""
    runs: dict[tuple[int, str, int], dict[str, Any]] = {}
    for log, number, (level, kind, seed, result) in run_log.entries(logs, RUN_LINE, "level, kind, seed, run"):
        if kind not in KINDS:
            raise SystemExit(f"{log}:{number}: unknown kind {kind!r} (known: {', '.join(KINDS)})")
        runs[(int(level), kind, int(seed))] = result
    return runs


def write_report(runs: dict[tuple[int, str, int], dict[str, Any]], meta: dict[str, Any], out: Path) -> dict:
    report = {"levels": summarise(runs), "meta": meta}
    out.mkdir(parents=True, exist_ok=True)
    (out / "team_vs_search.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return report


def clone_budget(level: int, seed: int, known: dict[tuple[int, str, int], dict[str, Any]]) -> float | None:
    """How long ``bc_only`` clones on: the training seconds of the same level and seed's ``lemon``
    run among ``known`` runs (this invocation's or a log's); None while there is none."""
    lemon = known.get((level, "lemon", seed))
    return float(lemon["train_s"]) if lemon is not None else None


# ------------------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="level 3, one seed, tiny budgets")
    parser.add_argument("--levels", type=int, nargs="+", help="levels (default 3 4 5; quick 3)")
    parser.add_argument("--seeds", type=int, help="seeds per team kind (default 5; quick 1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--heldout-tasks", type=int, help="held-out tasks evaluated (default 60)")
    parser.add_argument(
        "--warm-episodes", type=int, help="expert episodes the warm start clones (default 300)"
    )
    parser.add_argument(
        "--dagger-rounds", type=int, help="DAgger rounds after cloning (default 2; quick 1; 0: none)"
    )
    parser.add_argument("--iterations", type=int, help="PPO iterations of --batch env steps (default 12)")
    parser.add_argument("--lr", type=float, help="PPO's learning rate (default 1e-4)")
    parser.add_argument(
        "--rl-cloning-passes",
        type=int,
        help="passes of cloning continued after each PPO iteration of lemon and ippo (default 0)",
    )
    parser.add_argument(
        "--round-reward",
        choices=("answer", "spec"),
        help="what a round's reward improves: the team's answer (default) or the spec just run",
    )
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--jobs", type=int, default=2, help="runs at once (one process each)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench/team_vs_search"))
    parser.add_argument(
        "--log", type=Path, help="resumable: runs LOG holds are not run again; new ones are appended"
    )
    parser.add_argument(
        "--summarise", nargs="+", type=Path, metavar="LOG", help="no runs: the report of LOGs"
    )
    args = parser.parse_args(argv)
    command = " ".join(
        ["python", "benchmarks/team_vs_search.py", *(argv if argv is not None else sys.argv[1:])]
    )
    if args.summarise:
        missing = [str(p) for p in args.summarise if not p.is_file()]
        if missing:
            parser.error(f"--summarise: no such file: {', '.join(missing)}")
        runs = read_runs(args.summarise)
        if not runs:
            parser.error(f"--summarise: no '{RUN_LINE}' lines in {', '.join(map(str, args.summarise))}")
        try:
            return write_report(
                runs, {"command": command, "summarised_from": list(map(str, args.summarise))}, args.out
            )
        except ValueError as error:  # runs that cannot be summarised together
            parser.error(f"--summarise {' '.join(map(str, args.summarise))}: {error}")
    from orchestrl.envs.orchestration.tasks import LEVELS

    settings = QUICK if args.quick else FULL
    settings = dataclasses.replace(
        settings,
        levels=tuple(args.levels or settings.levels),
        seeds=args.seeds or settings.seeds,
        heldout_tasks=args.heldout_tasks or settings.heldout_tasks,
        warm_episodes=args.warm_episodes or settings.warm_episodes,
        iterations=args.iterations or settings.iterations,
        lr=args.lr or settings.lr,
        round_reward=args.round_reward or settings.round_reward,
        rl_cloning_passes=settings.rl_cloning_passes
        if args.rl_cloning_passes is None
        else args.rl_cloning_passes,
        dagger_rounds=settings.dagger_rounds if args.dagger_rounds is None else args.dagger_rounds,
    )
    if settings.dagger_rounds < 0:
        parser.error(f"--dagger-rounds: {settings.dagger_rounds} is negative (0: no DAgger)")
    if settings.rl_cloning_passes < 0:
        parser.error(f"--rl-cloning-passes: {settings.rl_cloning_passes} is negative (0: RL alone)")
    unknown = [lv for lv in settings.levels if lv not in LEVELS]
    if unknown:
        parser.error(f"--levels: unknown level(s) {unknown} (the env has {sorted(LEVELS)})")
    if args.log is not None and (args.log.is_dir() or not args.log.parent.is_dir()):
        parser.error(f"--log: {args.log} is a directory or in no directory")
    logged = read_runs([args.log]) if args.log is not None and args.log.is_file() else {}
    seeds = range(args.first_seed, args.first_seed + settings.seeds)
    wanted = [
        (lv, kind, s)
        for lv in settings.levels
        for kind in args.kinds
        for s in (seeds if kind in TEAMS else [0])
    ]
    runs = {key: logged[key] for key in wanted if key in logged}
    todo = [key for key in wanted if key not in runs]

    from orchestrl.training.runtime import quiet_environment, silence_noise, worker_pool

    quiet_environment(args.out)
    silence_noise(False)
    started, load = time.perf_counter(), os.getloadavg()
    where = run_log.environment()  # the code and libraries the runs load, as they start
    with worker_pool(max(1, args.jobs), args.out, fresh_per_task=True) as pool:
        pending: dict[Any, tuple[int, str, int]] = {}

        def submit_ready() -> None:
            for key in list(todo):
                level, kind, seed = key
                budget = clone_budget(level, seed, {**logged, **runs}) if kind == "bc_only" else 0.0
                if budget is None and "lemon" in args.kinds:
                    continue  # its seed's lemon run is still training
                todo.remove(key)
                pending[pool.submit(run, settings, level, kind, seed, args.out, budget or 0.0)] = key

        submit_ready()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                key = pending.pop(future)
                runs[key] = {
                    **future.result(),
                    "settings": dataclasses.asdict(settings),
                    "environment": where,
                }
                run_log.append(RUN_LINE, [*key, runs[key]], args.log)
            submit_ready()
    meta = {
        "command": command,
        "settings": dataclasses.asdict(settings),
        "wall_s": round(time.perf_counter() - started, 1),
        "loadavg_start": [round(v, 2) for v in load],
        "loadavg_end": [round(v, 2) for v in os.getloadavg()],
        "log": None if args.log is None else str(args.log),
    }
    return write_report({key: runs[key] for key in wanted if key in runs}, meta, args.out)


if __name__ == "__main__":
    main()
