"""LEMON as a PettingZoo ``ParallelEnv``: a team infers a data pipeline from source tables and a
few rows of the wanted output, and writes it as a spec that really runs.

A task (:mod:`.tasks`) is programming by example: the sources, the target's columns and a handful
of its rows are public; the rest of the target is hidden and only scores. Each agent is one node
slot. Its observation (:mod:`.features`) describes the public inputs and the candidate duties
proposed from them (:mod:`.candidates`); in every round all agents act at once (see
:mod:`.actions`): each picks a role and a candidate duty, a capacity and its inputs. The nodes form
an :class:`.spec.OrchestrationSpec`, which is validated, compiled to pandas code (:mod:`.compiler`),
executed in the sandbox pool (:mod:`.sandbox`) with a node cache (:mod:`.executor`) and scored
against the whole target (:mod:`.reward`). After a round each agent sees its own node's outcome,
every node's on the shared board (:mod:`.board`: status, rows, columns, which example rows survive
through it) and how the team's output compares with the target's public facts (columns, which
example rows it holds, row count against a ``target_rows`` the caller gives), and may revise; after ``rounds``
rounds the episode ends. All agents share one reward, a round's improvement of a score (``round_reward``):

- ``"spec"``: of the spec just run, so an episode's return is its last spec's score;
- ``"answer"``: of the team's answer. After each round the team answers with one of the specs it
  has run, chosen from public feedback only as ``solver_k`` chooses among its plans
  (:func:`.solver.answer_index`: the first that held every example row, else the first that held
  the most). An episode's return is then the score of its answer after the last round (what
  ``benchmarks/team_vs_search.py`` evaluates), and a round that tries a worse spec costs nothing
  once a better one has run. Counterfactual replays of the final spec are priced the same way.

Levels: 1: 2 agents, 1-2 stage linear pipelines over one table; 2: 3 agents, 3 stages with a join;
3: 5 agents, 4-5 stages over 2-3 tables, distractor columns and dirty data; 4: 8 agents, branching
DAGs over three tables; 5: 10 agents, 7-10 stages, up to two filters on one table (a conjunction)
besides its dedup, and eight candidates per role. ``split`` picks disjoint train / heldout task
seeds; ``reset(seed=s)`` picks task ``s``.

Beyond the PettingZoo API: ``expert_actions()`` (the solver's plan, :mod:`.solver`, which reads
the public inputs only), the counterfactual protocol of :mod:`orchestrl.envs.counterfactual`
(``counterfactual_spec()``, ``counterfactual_edits(spec, agent)``, ``counterfactual(spec, agent,
edit)``; ``replay(spec, agent, edit)`` gives the edited spec and the nodes re-run as well),
``episode_record()``, ``evaluate(spec)``, ``last_spec`` / ``last_yaml`` / ``last_source``, and
``reset(options={"task": task})`` to play a given :class:`.tasks.Task`. A task of public inputs only
(no hidden target: :func:`.byexample.public_task`, a user's own tables) plays unscored: every
reward is 0. For every task the round-2 feedback compares the output with the example rows and the
target's columns, and its row count with ``options["target_rows"]`` when given (else a ratio of 1:
never the hidden target's size). At the end of an episode every agent's info carries ``metrics``
(floats: success and score of the last round's spec, ``answer_success`` of the team's answer after
it, each reward term, cache_hit_rate, ...; with ``reference_metrics`` also the solver's, its search
stopped after ``rounds`` executions (``solver_k_success``) and a uniformly random team's success on
the same task) and ``episode`` (task, per-agent actions, score) for later counterfactuals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import pandas as pd
from pettingzoo import ParallelEnv

from orchestrl.envs.counterfactual import CounterfactualOutcome, Edit, EditFamily, EditNotApplicable
from orchestrl.envs.orchestration.actions import COMPONENTS, ActionLayout, MaskedMultiDiscrete, agent_id
from orchestrl.envs.orchestration.board import board
from orchestrl.envs.orchestration.edits import CounterfactualResult, apply_edit
from orchestrl.envs.orchestration.executor import Execution, Executor, NodeCache
from orchestrl.envs.orchestration.features import (
    CLIP,
    Feedback,
    ObservationBuilder,
    examples_held,
    feedback_kind,
)
from orchestrl.envs.orchestration.reward import UNSCORED, RewardConfig, Score, Scorer, schema_progress
from orchestrl.envs.orchestration.sandbox.pool import (
    SandboxPool,
    acquire_shared_pool,
    check_env_isolation,
    release_shared_pool,
)
from orchestrl.envs.orchestration.solver import (
    Attempt,
    Solution,
    answer_at,
    answer_index,
    search,
    solve,
    solver_actions,
    spec_actions,
)
from orchestrl.envs.orchestration.spec import OrchestrationSpec, SpecError, parse_spec
from orchestrl.envs.orchestration.tables import TargetIndex, row_hashes
from orchestrl.envs.orchestration.tasks import HELDOUT_OFFSET, LEVELS, TASK_CACHE, Task, generate_task
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

ROUND_REWARDS = ("spec", "answer")
"""What a round's reward is the improvement of (``round_reward``): the spec just run, or the team's
answer among the specs run so far."""


class Ran(NamedTuple):
    """One round of an episode, as the answer rule and the round reward read it."""

    held: float  # share of the example rows its output held (public)
    score: float
    success: float


def answer_of(rounds: list[Ran]) -> Ran:
    """The round whose spec is the team's answer (:func:`.solver.answer_index`)."""
    return rounds[answer_index([r.held for r in rounds])]


def examples_found(output: pd.DataFrame, task: Task) -> tuple[int, ...]:
    """Per example row of ``task``, how many rows of ``output`` equal it (all zeros unless
    ``output`` has exactly the target's columns): public inputs only."""
    examples = task.public.examples
    columns = sorted(str(c) for c in task.public.target_columns)
    if sorted(str(c) for c in output.columns) != columns:
        return (0,) * len(examples)
    have = row_hashes(output, columns)
    return tuple(int((have == h).sum()) for h in row_hashes(examples, columns))


@dataclass
class EpisodeRecord:
    """What a learner needs to replay counterfactuals of an episode later."""

    level: int
    split: str
    seed: int
    actions: dict[str, list[int]] = field(default_factory=dict)  # the last round's actions
    spec: OrchestrationSpec | None = None  # the last executed spec (None if it was invalid)
    score: float = 0.0

    @property
    def spec_yaml(self) -> str | None:
        return self.spec.to_yaml() if self.spec is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "split": self.split,
            "seed": self.seed,
            "actions": self.actions,
            "score": self.score,
        }


class OrchestrationEnv(ParallelEnv):
    """The LEMON env (module docstring). Kwargs: ``level`` 1-5; ``rounds`` per episode;
    ``split`` ``"train"`` / ``"heldout"``; ``reward_schedule`` in [0, 1] (0 dense shaping, 1
    final-heavy; see :mod:`.reward`); ``sandbox_workers`` (minimum size of the process-wide pool);
    ``sandbox_isolation`` (``auto``: all the confinement this process can get, which without root
    is a tripwire, not a boundary; ``strict``: refuse to start without the PID and network
    namespaces, chroot and uid of its own; see :mod:`.sandbox.pool`);
    ``job_cpu_s`` / ``job_wall_s`` (limits per execution); ``cache_mb`` (node cache size);
    ``layout_level`` (build observation and action spaces the size of that level's, with the extra
    entries masked, so one policy carries across a curriculum of levels); ``task_pool`` (draw
    unseeded resets from the split's first ``task_pool`` task seeds, 0 = from all of them: a finite
    training set whose generated tasks and node outputs stay cached, so sampling is several times
    faster; held-out evaluation normally keeps 0); ``reference_metrics`` (also report, per episode,
    the solver's success, its search's after ``rounds`` executions and one uniformly random team's
    success on the same task: what evaluation compares a trained team with); ``round_reward``
    (:data:`ROUND_REWARDS`, see the module's docstring)."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "orchestration_v0",
        "is_parallelizable": True,
        "render_modes": [],
    }

    def __init__(
        self,
        level: int = 1,
        rounds: int = 2,
        split: str = "train",
        reward_schedule: float = 0.0,
        sandbox_workers: int = 1,
        sandbox_isolation: str = "auto",
        job_cpu_s: float = 2.0,
        job_wall_s: float = 5.0,
        cache_mb: float = 64.0,
        layout_level: int | None = None,
        task_pool: int = 0,
        reference_metrics: bool = False,
        round_reward: str = "spec",
        render_mode: str | None = None,
    ) -> None:
        if round_reward not in ROUND_REWARDS:
            raise ValueError(f"round_reward must be one of {', '.join(ROUND_REWARDS)}, not {round_reward!r}")
        if level not in LEVELS:
            raise ValueError(f"level must be one of {sorted(LEVELS)}, not {level!r}")
        if split not in ("train", "heldout"):
            raise ValueError(f"split must be 'train' or 'heldout', not {split!r}")
        if int(rounds) < 1:
            raise ValueError("rounds must be at least 1")
        if not 0 <= int(task_pool) <= HELDOUT_OFFSET:
            raise ValueError(f"task_pool must be in [0, {HELDOUT_OFFSET}], not {task_pool!r}")
        self.task_pool = int(task_pool)
        self.reference_metrics = bool(reference_metrics)
        self.round_reward = round_reward
        self.level = int(level)
        self.rounds = int(rounds)
        self.split = split
        self.reward_config = RewardConfig(schedule=float(reward_schedule))
        self.render_mode = render_mode
        config = LEVELS[self.level]
        shape = LEVELS.get(int(layout_level or level))
        if shape is None or any(
            getattr(shape, f) < getattr(config, f) for f in ("agents", "max_sources", "duties")
        ):
            raise ValueError(f"layout_level must be a level >= level ({self.level}), not {layout_level!r}")
        self.layout = ActionLayout(
            agents=shape.agents, sources=shape.max_sources, duties=shape.duties, live_duties=config.duties
        )
        self.builder = ObservationBuilder(self.layout, config.skeleton)
        self.possible_agents = [agent_id(i) for i in range(config.agents)]
        self.agents: list[str] = []
        obs_space = gym.spaces.Dict(
            {
                OBS_KEY: gym.spaces.Box(-CLIP, CLIP, shape=(self.builder.size,), dtype=np.float32),
                MASK_KEY: gym.spaces.Box(0.0, 1.0, shape=(int(self.layout.nvec.sum()),), dtype=np.float32),
            }
        )
        self._observation_spaces = {a: obs_space for a in self.possible_agents}
        self._action_spaces: dict[str, MaskedMultiDiscrete] = {
            a: self.layout.space() for a in self.possible_agents
        }
        self._sandbox_workers = int(sandbox_workers)
        check_env_isolation(sandbox_isolation)
        self._sandbox_isolation = sandbox_isolation
        self._pool: SandboxPool | None = None
        self._cache = NodeCache(cache_mb)
        self._job_limits = (float(job_cpu_s), float(job_wall_s))
        self._executor: Executor | None = None
        self._rng = np.random.default_rng()
        self._task: Task | None = None
        self._target_rows: int | None = None
        self._scorers: dict[tuple[int, str, int], Scorer] = {}
        self._solutions: dict[tuple[int, str, int], Solution] = {}
        self._round = 0
        self._score = 0.0  # the score the last round's reward was measured to (``round_reward``)
        self._ran: list[Ran] = []  # this episode's rounds
        self._best_score = -np.inf
        self._last: Score | None = None
        self._last_execution: Execution | None = None
        self._record: EpisodeRecord | None = None
        self._episode_hits = 0
        self._episode_needed = 0
        self._episode_cpu_ms = 0.0
        self.last_spec: OrchestrationSpec | None = None

    # ------------------------------------------------------------------------------ spaces
    def observation_space(self, agent: str) -> gym.spaces.Dict:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> MaskedMultiDiscrete:
        return self._action_spaces[agent]

    # ------------------------------------------------------------------------------ episode
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            task_seed = int(seed)
        else:
            task_seed = int(self._rng.integers(0, self.task_pool or HELDOUT_OFFSET))
        if options and "task_seed" in options:
            task_seed = int(options["task_seed"])
        task = (options or {}).get("task")
        if task is not None and not isinstance(task, Task):
            raise TypeError(f"options['task'] must be a Task, not {type(task).__name__}")
        if task is not None and task.key.level != self.level:
            raise ValueError(
                f"options['task'] is a level-{task.key.level} task; this env is level {self.level}"
            )
        self._task = task if task is not None else generate_task(self.level, self.split, task_seed)
        rows = (options or {}).get("target_rows")
        self._target_rows = int(rows) if rows is not None else None
        self._task_part = self.builder.task_features(self._task.public, self._task.candidates)
        self.agents = list(self.possible_agents)
        self._round = 0
        self._score = 0.0
        self._ran = []
        self._last = None
        self._last_execution = None
        self._episode_hits = self._episode_needed = 0
        self._episode_cpu_ms = 0.0
        self.last_spec = None
        self._record = EpisodeRecord(self.level, self.split, self._task.key.seed)
        obs = {a: self._observe(a, None) for a in self.agents}
        return obs, {a: {} for a in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        if not self.agents or self._task is None:
            return {}, {}, {}, {}, {}
        task = self._task
        self._round += 1
        spec, errors = self._spec_from(actions)
        execution = None
        if spec is None:
            score = self._scorer(task).invalid() if task.target is not None else UNSCORED
        else:
            execution = self._execution().execute(task, spec)
            score = self._scorer(task).score(execution) if task.target is not None else UNSCORED
            self._episode_hits += execution.cache_hits
            self._episode_needed += execution.nodes_needed
            self._episode_cpu_ms += execution.cpu_ms
            self.last_spec = spec
            self.layout.context["nodes"] = [n.model_dump(mode="json") for n in spec.nodes]
            self._last_execution = execution
        self._last = score
        assert self._record is not None
        self._record.actions = self._recorded(actions)
        self._record.score = score.total
        self._record.spec = spec
        done = self._round >= self.rounds
        agents = list(self.agents)
        team = self._team_feedback(spec, execution)
        if spec is not None and execution is not None:
            public = task.public
            team["board"] = board(
                spec, execution, self.possible_agents, public.sources, self._target_columns, public.examples
            )
        held = examples_held(team.get("examples_found", ()))
        self._ran.append(Ran(held, score.total, score.success))
        value = self._answer_score(held, score.total)
        reward, self._score = value - self._score, value
        team["team_actions"] = tuple(
            tuple(self._record.actions[a]) if a in self._record.actions else None
            for a in self.possible_agents
        )
        feedback = {a: self._feedback(a, spec, execution, team, self._record.actions.get(a)) for a in agents}
        obs = {a: self._observe(a, feedback[a]) for a in agents}
        rewards = dict.fromkeys(agents, float(reward))
        terminations = dict.fromkeys(agents, done)
        truncations = dict.fromkeys(agents, False)
        info: dict[str, Any] = {
            "round": self._round,
            "score": score.total,
            "success": score.success,
            "examples_held": held,
            "valid": spec is not None,
        }
        if errors:
            info["spec_errors"] = errors
        infos = {a: dict(info) for a in agents}
        if done:
            metrics = self._metrics(score, spec)
            episode = self._record.as_dict()
            for a in agents:
                infos[a]["metrics"] = dict(metrics)
                infos[a]["episode"] = episode
            if spec is not None and score.total > self._best_score:
                # A new best episode of this env: hand its deployable artifacts to the platform
                # (see orchestrl.envs.reporting), which keeps the best one across the run.
                self._best_score = score.total
                infos[agents[0]]["artifacts"] = {"spec.yaml": spec.to_yaml(), "pipeline.py": self.last_source}
            self.agents = []
        return obs, rewards, terminations, truncations, infos

    def close(self) -> None:
        """Releases this env's hold on the shared sandbox pool (the last env to go closes it)."""
        if self._pool is not None:
            release_shared_pool(self._pool)
        self._pool = None
        self._executor = None

    # ------------------------------------------------------------------------------ extras
    @property
    def task(self) -> Task:
        if self._task is None:
            raise RuntimeError("call reset() first")
        return self._task

    @property
    def option_rows(self) -> dict[str, int]:
        """Where the observation lists each role's candidate duties (one row of features per duty,
        role-major, from the ``candidates`` block): a model can score an agent's ``duty`` row by
        row given its ``role`` (``model.option_rows``). Role 0 is idle and has no rows."""
        return {
            "given": COMPONENTS.index("role"),
            "component": COMPONENTS.index("duty"),
            "first": 1,
            "start": self.builder.offsets()["candidates"].start,
            "width": self.builder.candidate_width,
        }

    @property
    def last_yaml(self) -> str | None:
        return self.last_spec.to_yaml() if self.last_spec is not None else None

    @property
    def last_source(self) -> str | None:
        """The stand-alone ``pipeline.py`` of the last executed spec."""
        return self._execution().compile(self.last_spec).source if self.last_spec is not None else None

    @property
    def last_score(self) -> Score | None:
        return self._last

    def evaluate(self, spec: OrchestrationSpec | str) -> Score:
        """Executes ``spec`` on the current task in the sandbox and scores it (outside any episode)."""
        spec = parse_spec(spec)
        return self._scorer(self.task).score(self._execution().execute(self.task, spec))

    def expert_actions(self) -> dict[str, np.ndarray]:
        """Actions that write the solver's plan for the current task (:mod:`.solver`: a search
        over the public inputs, checked against the examples in the sandbox; never the hidden
        reference). The warm start clones these."""
        return solver_actions(self.solution(), self.task, self.layout)

    def solution(self, task: Task | None = None) -> Solution:
        """The solver's plan for ``task`` (default: the current one), memoised per task."""
        task = task or self.task
        key = (task.key.level, task.key.split, task.key.seed)
        found = self._solutions.get(key)
        if found is None:
            found = solve(task, self._execution())
            if len(self._solutions) >= TASK_CACHE:
                self._solutions.pop(next(iter(self._solutions)))
            self._solutions[key] = found
        return found

    def search_trace(self, executions: int) -> list[Attempt]:
        """The solver's :func:`.solver.search` on the current task, at most ``executions`` runs."""
        return search(self.task, self._execution(), executions)

    def episode_record(self) -> EpisodeRecord:
        if self._record is None:
            raise RuntimeError("call reset() first")
        return self._record

    # -- the counterfactual protocol (orchestrl.envs.counterfactual) -------------------------------
    def counterfactual_spec(self) -> OrchestrationSpec | None:
        """The spec the final round executed; None when it was invalid (``last_spec`` would be an
        earlier round's, which is not what the final actions wrote)."""
        return self._record.spec if self._record is not None else None

    def counterfactual_edits(self, spec: OrchestrationSpec, agent: str) -> list[EditFamily]:
        families = [EditFamily.ALTERNATIVE]
        try:
            node = spec.node(agent)
        except KeyError:  # an idle agent wrote no node: only an alternative changes anything
            return families
        if not node.duty.is_base:
            families.append(EditFamily.BASE_DUTY)
        if node.deps:
            families.append(EditFamily.DROP_EDGE)
        if node.capacity != type(node.capacity)("small"):
            families.append(EditFamily.DOWNGRADE_CAPACITY)
        return families

    def counterfactual(
        self, spec: OrchestrationSpec | str | None, agent: str, edit: Edit
    ) -> CounterfactualOutcome:
        """``R(edited)`` and ``R(spec)`` (see :meth:`replay`); raises :class:`EditNotApplicable` when
        the edit changes nothing. An edit that makes the spec invalid is applicable: it scores the
        invalid-spec penalty, as in LEMON. With ``round_reward="answer"`` an edit of the latest
        round's spec is priced as the return so far had that round run the edited spec; when an
        earlier round already held every example row, that answer stands whatever the edit, so
        nothing runs (``terms["executions"]`` 0, else 1)."""
        parsed = self.last_spec if spec is None else parse_spec(spec)
        record = self._record
        latest = parsed is not None and record is not None and bool(self._ran) and parsed == record.spec
        if latest and self.round_reward == "answer" and any(r.held >= 1.0 for r in self._ran[:-1]):
            if not self._edit_changes(parsed, agent, edit):
                raise EditNotApplicable(f"{edit.family} changes nothing for {agent}")
            terms = {"nodes_run": 0.0, "cache_hits": 0.0, "executions": 0.0}
            return CounterfactualOutcome(reward=self._score, base_reward=self._score, terms=terms)
        result = self.replay(parsed, agent, edit)
        if not result.applicable:
            raise EditNotApplicable(f"{edit.family} changes nothing for {agent}")
        terms = {
            **result.terms,
            "nodes_run": float(result.nodes_run),
            "cache_hits": float(result.cache_hits),
            "executions": 1.0,
        }
        reward, base = result.reward, result.base_reward
        if latest:  # the return so far, as it is and had the latest round run the edited spec
            reward, base = self._answer_score(result.examples_held, reward), self._score
        return CounterfactualOutcome(reward=reward, base_reward=base, terms=terms)

    def replay(self, spec: OrchestrationSpec | str | None, agent: str, edit: Edit) -> CounterfactualResult:
        """Re-executes ``spec`` (default: the last executed one) with one agent's choice edited
        (:func:`.edits.apply_edit`: an alternative action is decoded with the rest of the team's
        joint action, :meth:`_actions_of`), using the node cache; returns the edited reward, its
        terms, ``delta`` and the edited spec.
        The spec's ``task`` field says which task it belongs to (regenerated if it is not the
        current one)."""
        if agent not in self.possible_agents:
            raise ValueError(f"unknown agent {agent!r} (agents: {', '.join(self.possible_agents)})")
        spec = self.last_spec if spec is None else parse_spec(spec)
        if spec is None:
            raise RuntimeError("no spec has been executed yet")
        task = self._task_of(spec)
        scorer = self._scorer(task)
        record = self._record
        if task is self._task and record is not None and record.spec == spec:
            base = record.score  # the latest round's spec: scored when it ran
        else:
            base = scorer.score(self._execution().execute(task, spec)).total
        try:
            edited = self._edited(spec, agent, edit, task)
        except SpecError as exc:
            invalid = scorer.invalid()
            return CounterfactualResult(
                agent, edit, True, invalid.total, base, invalid.terms(), spec_errors=tuple(exc.codes)
            )
        if edited is None:
            return CounterfactualResult(agent, edit, False, base, base, {})
        execution = self._execution().execute(task, edited)
        score = scorer.score(execution)
        ran = sum(1 for n in execution.nodes.values() if n.status != "skipped" and not n.cached)
        output = execution.output if execution.ok else None
        return CounterfactualResult(
            agent,
            edit,
            True,
            score.total,
            base,
            score.terms(),
            edited,
            nodes_run=ran,
            cache_hits=execution.cache_hits,
            examples_held=examples_held(examples_found(output, task)) if output is not None else 0.0,
        )

    def _edited(
        self, spec: OrchestrationSpec, agent: str, edit: Edit, task: Task
    ) -> OrchestrationSpec | None:
        """``spec`` with ``agent``'s choice edited (None: the edit changes nothing; raises
        :class:`.spec.SpecError` when the edited spec is invalid)."""
        return apply_edit(
            spec,
            agent,
            edit,
            lambda action: self.layout.decode(task, {**self._actions_of(spec, task), agent: action}),
        )

    def _edit_changes(self, spec: OrchestrationSpec, agent: str, edit: Edit) -> bool:
        """Whether ``edit`` changes ``spec`` (an edit that makes it invalid does), without running it."""
        try:
            return self._edited(spec, agent, edit, self._task_of(spec)) is not None
        except SpecError:
            return True

    def _actions_of(self, spec: OrchestrationSpec, task: Task) -> dict[str, Any]:
        """The joint action that wrote ``spec``, which an ``alternative`` edit decodes again with
        one agent's action replaced: the final round's recorded actions when they wrote ``spec``
        (what LEMON replays), else the actions that write it (:func:`.solver.spec_actions`: a spec
        read back from YAML carries no actions). Raises ``ValueError`` for a spec no joint action
        writes (e.g. one that reads a raw table after an agent cleaned it)."""
        record = self._record
        if record is not None and record.spec is not None and record.spec == spec:
            return dict(record.actions)
        try:
            actions = spec_actions(spec, task, self.layout)
            written = parse_spec(self.layout.decode(task, actions)) == spec
        except ValueError:  # SpecError included
            written = False
        if not written:
            raise ValueError("no joint action writes this spec: an alternative edit has no actions to edit")
        return actions

    # ------------------------------------------------------------------------------ internals
    def _answer_score(self, held: float, total: float) -> float:
        """The score a round's reward measures when this episode's latest round holds ``held`` of
        the example rows and scores ``total`` (the rounds before it as they ran): that spec's own
        with ``round_reward="spec"``, else the team's answer's (:func:`.solver.answer_index`)."""
        if self.round_reward == "spec":
            return total
        return answer_of([*self._ran[:-1], Ran(held, total, 0.0)]).score

    def _execution(self) -> Executor:
        if self._executor is None:
            self._pool = acquire_shared_pool(self._sandbox_workers, self._sandbox_isolation)
            self._executor = Executor(self._pool, self._cache, *self._job_limits)
        return self._executor

    def _scorer(self, task: Task) -> Scorer:
        key = (task.key.level, task.key.split, task.key.seed)
        scorer = self._scorers.get(key)
        if scorer is None:
            # Nothing hidden runs here: the env's node cache only ever holds what the agents and
            # the solver ran (and no agent observes its hits).
            assert task.target is not None
            scorer = Scorer(
                TargetIndex(task.target),
                task.reference_work,
                self.layout.agents,
                self.reward_config,
                examples=task.public.examples,
            )
            if len(self._scorers) >= TASK_CACHE:
                self._scorers.pop(next(iter(self._scorers)))
            self._scorers[key] = scorer
        return scorer

    def _task_of(self, spec: OrchestrationSpec) -> Task:
        """The task a spec was written for: the current one, or regenerated from ``spec.task``."""
        ref = spec.task
        if ref is None:
            return self.task
        current = self._task.key if self._task is not None else None
        if current is not None and (ref.level, ref.split, ref.seed) == (
            current.level,
            current.split,
            current.seed,
        ):
            return self.task
        if ref.level != self.level:
            raise ValueError(f"spec is for level {ref.level}, this env is level {self.level}")
        return generate_task(ref.level, ref.split, ref.seed)

    def _recorded(self, actions: Mapping[str, Any]) -> dict[str, list[int]]:
        out = {}
        for agent in self.possible_agents:
            try:
                out[agent] = [int(v) for v in self.layout.check(actions[agent])]
            except (KeyError, ValueError, TypeError):
                continue
        return out

    def plan_of(self, actions: Mapping[str, Any]) -> OrchestrationSpec | None:
        """The spec ``actions`` would write on the current task, or None when they write no valid
        one; nothing runs (what a team that never re-runs a plan compares with the plans it ran)."""
        return self._spec_from(actions)[0]

    def _spec_from(self, actions: Mapping[str, Any]) -> tuple[OrchestrationSpec | None, list[str]]:
        try:
            data = self.layout.decode(self.task, actions)
            return parse_spec(data), []
        except SpecError as exc:
            return None, exc.codes

    def _team_feedback(self, spec: OrchestrationSpec | None, execution: Execution | None) -> dict[str, Any]:
        """How the team's output compares with the target: columns, row count, example rows."""
        output = execution.output if execution is not None and execution.ok else None
        if spec is None or output is None:
            return {"team_valid": spec is not None}
        return {
            "team_valid": True,
            "team_schema": schema_progress([str(c) for c in output.columns], self._target_columns),
            "team_rows_ratio": len(output) / max(self._wanted_rows(len(output)), 1),
            "examples_found": examples_found(output, self.task),
        }

    def _feedback(
        self,
        agent: str,
        spec: OrchestrationSpec | None,
        execution: Execution | None,
        team: Mapping[str, Any],
        action: list[int] | None,
    ) -> Feedback:
        own = tuple(action) if action is not None else None
        if spec is None or execution is None:
            return Feedback("invalid", action=own, **team)
        report = team["board"][self.possible_agents.index(agent)]  # its own line on the board
        if report is None:
            return Feedback("idle", action=own, **team)
        run = execution.nodes[agent]
        return Feedback(
            kind="upstream" if run.status == "skipped" else feedback_kind(run.kind),
            rows_ratio=report.rows_ratio,
            schema_match=report.schema_match,
            is_output=report.is_output,
            action=own,
            **team,
        )

    @property
    def _target_columns(self) -> frozenset[str]:
        """The target's columns: public (the example rows' columns)."""
        return frozenset(str(c) for c in self.task.public.target_columns)

    def _wanted_rows(self, output_rows: int) -> int:
        """The wanted row count when the caller gives it (``reset``'s ``target_rows``, as
        ``orchestrl plan --target-rows`` does), else ``output_rows`` (no signal: a ratio of 1).
        Never the hidden target's size, in training as in ``plan``."""
        return self._target_rows if self._target_rows is not None else output_rows

    def _observe(self, agent: str, feedback: Feedback | None) -> dict[str, np.ndarray]:
        slot = int(agent.rsplit("_", 1)[1])
        vector = self.builder.build(self._task_part, slot, self._round, self.rounds, feedback)
        return {OBS_KEY: vector, MASK_KEY: self.layout.mask(self.task, slot)}

    def _metrics(self, score: Score, spec: OrchestrationSpec | None) -> dict[str, float]:
        metrics = score.terms()
        reference = max(self.task.reference_work, 1e-9)
        metrics.update(
            {
                "cache_hit_rate": self._episode_hits / self._episode_needed if self._episode_needed else 0.0,
                "valid": float(spec is not None),
                "failed": float(score.failure is not None),
                "work_ratio": score.work / reference if score.work else 0.0,
                "nodes": float(len(spec.nodes)) if spec is not None else 0.0,
                "edges": float(spec.edges()) if spec is not None else 0.0,
                "sandbox_cpu_ms": self._episode_cpu_ms,
                # the team's answer after its last round, chosen as solver_k chooses (answer_index)
                "answer_success": answer_of(self._ran).success,
            }
        )
        if self.reference_metrics and self.task.target is not None:
            metrics.update(self._reference_metrics())
        return {k: float(v) for k, v in metrics.items()}

    def _reference_metrics(self) -> dict[str, float]:
        """The solver's success on this task, its search's stopped after as many executions as the
        team had rounds (``solver_k``, answering by :func:`.solver.answer_index`, to compare with
        ``answer_success``), and one uniformly random team's (its masked action sample, one round):
        the figures a trained team is compared with."""
        task, scorer = self.task, self._scorer(self.task)
        solution = self.solution()
        solved = 0.0
        if solution.spec is not None:
            solved = scorer.score(self._execution().execute(task, solution.spec)).success
        at_k = answer_at(self.search_trace(self.rounds), self.rounds)
        solved_at_k = scorer.score(self._execution().execute(task, at_k.spec)).success if at_k else 0.0
        random = {}
        for slot, agent in enumerate(self.possible_agents):
            random[agent] = self._action_spaces[agent].sample(mask=self.layout.mask(task, slot))
        try:
            spec = parse_spec(self.layout.decode(task, random))
            lucky = scorer.score(self._execution().execute(task, spec)).success
        except SpecError:
            lucky = 0.0
        return {
            "solver_success": float(solved),
            "solver_k_success": float(solved_at_k),
            "solver_seconds": solution.seconds,
            "random_team_success": float(lucky),
        }
