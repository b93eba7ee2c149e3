"""LEMON's planning env: a team writes the pipeline for an export, one decision per agent, choosing
among the synthesiser's own proposals; the pipeline runs in the sandbox and is scored on the whole
hidden wanted table.

A task (:mod:`.grammar`) is an export and the first rows of the wanted table; the same code turns a
user's files into one (:func:`.grammar.files_task`), so ``orchestrl plan`` sees a user's files
exactly as training saw generated tasks. Each agent (:data:`.choices.AGENTS`) picks one option of
its list (:mod:`.choices`): a table's cleaning, the joins, a filter. The output's shape is deduced
from the example rows on the table the decisions give (:func:`..synthesis.search.finish`), the
pipeline is written as an orchestration spec and runs in the sandbox pool: one scored execution
per round.

**Observation** (``Dict``: ``observations`` and ``action_mask`` over the agent's list): the agent's
one-hot, the round, a board every agent sees (the last round's pipeline was valid, its shape was
deduced, the share of example rows its output holds, whether its columns are the target's, its row
count against the filtered table's), then one row of :data:`.choices.FEATURES` public features per
option plus whether the agent took it last round. After a round, an option's two "tried" features
are those of the option with the other agents on their last choices
(:meth:`.choices.Choices.tried_in`): what changing this one decision would give, so a second round
can mend the first. A model reads it as a table of options (``model.candidate_features``:
:data:`CANDIDATE_FEATURES`).

**Reward**: the score's improvement each round, so an episode's return is its final score: 1 when
the output is the wanted table (the same columns and rows, in order), else a third of the share of
example rows it holds.

``expert_actions()`` are the generator's own decisions (a label, as in supervised learning on
generated data; the synthesiser, which reads the public inputs only, is the baseline a team is
compared with: ``reference_metrics``). The counterfactual protocol (:mod:`orchestrl.envs.counterfactual`)
re-runs the final round with one agent's choice replaced by another option or by its list's first,
so LEMON's replayed credit applies as on the level env.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pandas as pd
from pettingzoo import ParallelEnv

from orchestrl.envs.counterfactual import CounterfactualOutcome, Edit, EditFamily, EditNotApplicable
from orchestrl.envs.orchestration.actions import MaskedMultiDiscrete
from orchestrl.envs.orchestration.executor import Executor, NodeCache
from orchestrl.envs.orchestration.planning.choices import AGENTS, FEATURES, OPTIONS, TRIED, Choices
from orchestrl.envs.orchestration.planning.grammar import PlanningTask, files_task, generate
from orchestrl.envs.orchestration.sandbox.pool import (
    SandboxPool,
    acquire_shared_pool,
    check_env_isolation,
    release_shared_pool,
)
from orchestrl.envs.orchestration.spec import OrchestrationSpec
from orchestrl.envs.orchestration.synthesis.search import Program, finish
from orchestrl.envs.orchestration.tables import held_share, same_table
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

BOARD = 5
CONTEXT = len(AGENTS) + 1 + BOARD
CANDIDATE_FEATURES = FEATURES + 1
"""Features per option row of the observation (the option's, and whether it was taken last round)."""
TASKS = 1_000_000


def same_output(output: pd.DataFrame | None, wanted: pd.DataFrame | None) -> bool:
    """The output is the wanted table: the same columns in order, the same rows in the same order
    (the deduced shape orders rows as the wanted table's pipeline does)."""
    return output is not None and wanted is not None and same_table(output.reset_index(drop=True), wanted)


class PlanningEnv(ParallelEnv):
    """The planning env (module docstring). Kwargs: ``split`` (``train`` / ``heldout``), ``rounds``,
    ``task_pool`` (draw unseeded resets from the split's first ``task_pool`` seeds; 0: all),
    ``reference_metrics`` (also report the synthesiser's and a random team's success on each
    episode's task), ``sandbox_workers``, ``sandbox_isolation``, ``job_cpu_s``, ``job_wall_s``,
    ``cache_mb`` (as :class:`..env.OrchestrationEnv`'s)."""

    metadata: ClassVar[dict[str, Any]] = {"name": "orchestration_planning_v0", "is_parallelizable": True}

    def __init__(
        self,
        split: str = "train",
        rounds: int = 2,
        task_pool: int = 0,
        reference_metrics: bool = False,
        sandbox_workers: int = 1,
        sandbox_isolation: str = "auto",
        job_cpu_s: float = 2.0,
        job_wall_s: float = 5.0,
        cache_mb: float = 64.0,
        render_mode: str | None = None,
    ) -> None:
        if split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
        if int(rounds) < 1:
            raise ValueError(f"rounds must be at least 1, not {rounds!r}")
        if not 0 <= int(task_pool) <= TASKS:
            raise ValueError(f"task_pool must be in [0, {TASKS}], not {task_pool!r}")
        check_env_isolation(sandbox_isolation)
        self.split, self.rounds, self.task_pool = split, int(rounds), int(task_pool)
        self.reference_metrics = bool(reference_metrics)
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        self.agents: list[str] = []
        size = CONTEXT + OPTIONS * CANDIDATE_FEATURES
        space = gym.spaces.Dict(
            {
                OBS_KEY: gym.spaces.Box(-10.0, 10.0, shape=(size,), dtype=np.float32),
                MASK_KEY: gym.spaces.Box(0.0, 1.0, shape=(OPTIONS,), dtype=np.float32),
            }
        )
        self._observation_space = space
        self._action_space = MaskedMultiDiscrete(np.array([OPTIONS], dtype=np.int64))
        self._pool_args = (int(sandbox_workers), sandbox_isolation)
        self._pool: SandboxPool | None = None
        self._executor: Executor | None = None
        self._cache = NodeCache(cache_mb)
        self._limits = (float(job_cpu_s), float(job_wall_s))
        self._rng = np.random.default_rng()
        self._task: PlanningTask | None = None
        self._target_rows: int | None = None
        self._round = 0
        self._score = 0.0
        self._board = np.zeros(BOARD, dtype=np.float32)
        self._taken: dict[str, int] = {}
        self._spec: OrchestrationSpec | None = None

    def observation_space(self, agent: str) -> gym.spaces.Dict:
        return self._observation_space

    def action_space(self, agent: str) -> MaskedMultiDiscrete:
        return self._action_space

    @property
    def task(self) -> PlanningTask:
        if self._task is None:
            raise RuntimeError("call reset() first")
        return self._task

    # ------------------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        options = options or {}
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            task_seed = int(seed)
        else:
            task_seed = int(self._rng.integers(0, self.task_pool or TASKS))
        task = options.get("task")
        if task is not None and not isinstance(task, PlanningTask):
            raise TypeError(f"options['task'] must be a PlanningTask, not {type(task).__name__}")
        self._task = (
            task if task is not None else generate(self.split, int(options.get("task_seed", task_seed)))
        )
        rows = options.get("target_rows")
        self._target_rows = int(rows) if rows is not None else None
        self.agents = list(self.possible_agents)
        self._round, self._score = 0, 0.0
        self._board = np.zeros(BOARD, dtype=np.float32)
        self._taken = {}
        self._spec = None
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents:
            return {}, {}, {}, {}, {}
        self._round += 1
        chosen = {a: self._checked(a, actions.get(a)) for a in self.possible_agents}
        spec, table, deduced = self.write(chosen)
        output = self.execute(spec)
        score = self._score_of(output)
        reward = score - self._score
        self._score, self._taken, self._spec = score, chosen, spec
        self._board = self._board_of(spec, table, deduced, output)
        done = self._round >= self.rounds
        agents = list(self.agents)
        info: dict[str, Any] = {"round": self._round, "score": score, "valid": spec is not None}
        infos = {a: dict(info) for a in agents}
        if done:
            metrics = self._metrics(score, output)
            for a in agents:
                infos[a]["metrics"] = dict(metrics)
            self.agents = []
        obs = {a: self._observe(a) for a in agents}
        return (
            obs,
            dict.fromkeys(agents, float(reward)),
            dict.fromkeys(agents, done),
            dict.fromkeys(agents, False),
            infos,
        )

    def close(self) -> None:
        if self._pool is not None:
            release_shared_pool(self._pool)
        self._pool, self._executor = None, None

    # ------------------------------------------------------------------------------ extras
    def expert_actions(self) -> dict[str, np.ndarray]:
        """The generator's decisions for the current task (a label; module docstring)."""
        reference = self.task.reference
        if reference is None:
            raise RuntimeError("this task has no label (a user's files): there is nothing to clone")
        return {a: np.array([reference[a]], dtype=np.int64) for a in self.possible_agents}

    @staticmethod
    def files_task(
        sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame, description: str | None = None
    ) -> PlanningTask:
        """A user's files, and what they asked for in words, as a task of this env (what
        ``orchestrl plan`` plays)."""
        return files_task(sources, examples, description)

    # -- the counterfactual protocol (orchestrl.envs.counterfactual) -------------------------------
    def counterfactual_spec(self) -> OrchestrationSpec | None:
        """The spec the last round wrote (None when its decisions made no pipeline)."""
        return self._spec

    def counterfactual_edits(self, spec: Any, agent: str) -> list[EditFamily]:
        """Another option of the agent's list; or its list's first option, when it took another."""
        families = [EditFamily.ALTERNATIVE]
        if self._taken.get(agent, 0) != 0:
            families.append(EditFamily.BASE_DUTY)
        return families

    def counterfactual(self, spec: Any, agent: str, edit: Edit) -> CounterfactualOutcome:
        """``R`` of the last round's decisions with ``agent``'s replaced (the others kept), written,
        run in the sandbox (the node cache re-runs what changed) and scored; ``R`` of the decisions
        as taken beside it."""
        if agent not in self.possible_agents or spec is None or spec != self._spec:
            raise EditNotApplicable(f"{agent}: no decision of the last round wrote this spec")
        taken = self._taken.get(agent, 0)
        if edit.family is EditFamily.BASE_DUTY:
            choice = 0
        elif edit.family is EditFamily.ALTERNATIVE:
            choice = self._checked(agent, edit.action)
        else:
            raise EditNotApplicable(f"{edit.family}: a planning agent's only part is its choice")
        if choice == taken:
            raise EditNotApplicable(f"{edit.family} changes nothing for {agent}")
        edited, _, _ = self.write({**self._taken, agent: choice})
        reward = self._score_of(self.execute(edited))
        return CounterfactualOutcome(
            reward=reward, base_reward=self._score, terms={"success": float(reward >= 1.0)}
        )

    def write(self, actions: Mapping[str, int]) -> tuple[OrchestrationSpec | None, pd.DataFrame | None, bool]:
        """The spec the decisions write (None when a step reads a column its input lacks), the
        table before the output's shape, and whether the shape was deduced from the examples."""
        choices: Choices = self.task.choices
        try:
            table = choices.table(actions).reset_index(drop=True)
        except (KeyError, ValueError, TypeError):
            return None, None, False
        cleaning, main = choices.streams(actions)
        done = finish(table, self.task.examples, choices.facts, self._target_rows)
        post, grouped = (done[0], done[1]) if done is not None else ((), False)
        program = Program(choices.names, cleaning, (*main, *post), 0.0, grouped)
        return program.spec(), table, done is not None

    # ------------------------------------------------------------------------------ internals
    def _checked(self, agent: str, action: Any) -> int:
        index = int(np.asarray(action).reshape(-1)[0]) if action is not None else 0
        return index if 0 <= index < len(self.task.choices.options[agent]) else 0

    def _executor_of(self) -> Executor:
        if self._executor is None:
            self._pool = acquire_shared_pool(*self._pool_args)  # type: ignore[arg-type]
            self._executor = Executor(self._pool, self._cache, *self._limits)
        return self._executor

    def execute(self, spec: OrchestrationSpec | None) -> pd.DataFrame | None:
        """The output of ``spec`` run in the sandbox on the current task (None: no spec, or it failed)."""
        if spec is None:
            return None
        execution = self._executor_of().execute(self.task, spec)  # type: ignore[arg-type]
        return execution.output if execution.ok else None

    def _score_of(self, output: pd.DataFrame | None) -> float:
        task = self.task
        if task.target is None or output is None:
            return 0.0
        if same_output(output, task.target):
            return 1.0
        return held_share(task.examples, output) / 3

    def _board_of(
        self,
        spec: OrchestrationSpec | None,
        table: pd.DataFrame | None,
        deduced: bool,
        output: pd.DataFrame | None,
    ) -> np.ndarray:
        examples = self.task.examples
        columns = output is not None and [str(c) for c in output.columns] == list(self.task.target_columns)
        rows = 0.0 if output is None or table is None else len(output) / max(len(table), 1)
        return np.array(
            [float(spec is not None), float(deduced), held_share(examples, output), float(columns), rows],
            dtype=np.float32,
        )

    def _observe(self, agent: str) -> dict[str, np.ndarray]:
        slot = self.possible_agents.index(agent)
        choices = self.task.choices
        head = np.zeros(CONTEXT, dtype=np.float32)
        head[slot] = 1.0
        head[len(AGENTS)] = self._round / self.rounds
        head[len(AGENTS) + 1 :] = self._board
        rows = np.zeros((OPTIONS, CANDIDATE_FEATURES), dtype=np.float32)
        rows[:, :FEATURES] = choices.features[slot]
        if agent in self._taken:
            rows[:, TRIED] = choices.tried_in(agent, self._taken)
            rows[self._taken[agent], FEATURES] = 1.0
        vector = np.clip(np.concatenate([head, rows.reshape(-1)]), -10.0, 10.0)
        return {OBS_KEY: vector, MASK_KEY: choices.mask(agent)}

    def _metrics(self, score: float, output: pd.DataFrame | None) -> dict[str, float]:
        metrics = {
            "score": float(score),
            "success": float(score >= 1.0),
            "valid": float(self._spec is not None),
            "examples_held": float(held_share(self.task.examples, output)),
            "rounds": float(self._round),
        }
        if self.reference_metrics and self.task.target is not None:
            metrics.update(self._reference_metrics())
        return metrics

    def _reference_metrics(self) -> dict[str, float]:
        """The synthesiser's success on this task (its search on the public inputs, the user's words
        included, as the team reads them; its pipeline run once in the sandbox) and one uniformly
        random team's."""
        from orchestrl.envs.orchestration.synthesis import synthesise

        task = self.task
        found = synthesise(task.sources, task.examples, self._target_rows, description=task.description)
        solved = same_output(self.execute(found.spec), task.target) if found.spec else False
        random = {a: int(self._rng.integers(len(task.choices.options[a]))) for a in self.possible_agents}
        spec, _, _ = self.write(random)
        lucky = same_output(self.execute(spec), task.target)
        return {"solver_success": float(solved), "random_team_success": float(lucky)}
