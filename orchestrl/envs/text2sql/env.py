"""``Text2SQLEnv``: two agents turn a question into SQL that runs on a real SQLite database.

The NeuroMAS Text2SQL showcase as a one-step cooperative PettingZoo ``ParallelEnv``. Each episode
is one question about one of several generated databases. In its single step the
``schema_extractor`` picks tables, columns and the condition column, the ``sql_composer`` picks the
aggregate, operator, value span, ordering and limit, and the env assembles their choices into one
query (:mod:`.actions`), runs it read-only (:mod:`.sql_runner`) and rewards both agents with the same
team reward (:mod:`.scoring`): 1 for the gold query's result, a penalty for SQL SQLite rejects, a
small cost for tokens beyond the gold query's.

Observations are ``Dict(observations=Box(OBS_DIM), action_mask=Box(sum(nvec)))``; the layout of
``observations`` is documented in :mod:`.observation`. ``expert_actions()`` returns the gold
decomposition for the current question.

Counterfactuals (:mod:`orchestrl.envs.counterfactual`): the last episode's question and actions are
kept (``counterfactual_spec``), and ``counterfactual(spec, agent, Edit.alternative(a))`` runs the
query the team would have written with ``agent``'s action swapped for ``a`` (the other agent's kept),
on the same database: one SQLite query, milliseconds.

Example::

    env = Text2SQLEnv(split="train", data_dir=tmp)
    obs, infos = env.reset(seed=0)
    obs, rewards, terms, truncs, infos = env.step(env.expert_actions())
    assert rewards["sql_composer"] == 1.0 and infos["sql_composer"]["metrics"]["success"] == 1.0
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from orchestrl.envs.counterfactual import CounterfactualOutcome, Edit, EditFamily, EditNotApplicable
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY
from orchestrl.envs.text2sql import actions as act
from orchestrl.envs.text2sql.bank import QuestionBank, load_bank
from orchestrl.envs.text2sql.expert import expert_actions
from orchestrl.envs.text2sql.observation import OBS_DIM, encode_observation, observation_high
from orchestrl.envs.text2sql.query import PlanError, QueryPlan, render_sql
from orchestrl.envs.text2sql.questions import KINDS, Question
from orchestrl.envs.text2sql.schemas import SCHEMAS, SPLITS
from orchestrl.envs.text2sql.scoring import Score, score
from orchestrl.envs.text2sql.sql_runner import SQLRunner

log = logging.getLogger(__name__)


class Text2SQLEnv(ParallelEnv):
    """Schema extractor + SQL composer, scored by execution on real SQLite.

    Args:
        split: ``train``, ``validation`` or ``test``. The splits hold disjoint schemas; half of
            ``test`` is phrased by a grammar never used elsewhere.
        db_seed: seed of the generated databases and questions (not of episode sampling, which
            ``reset(seed=...)`` controls).
        data_dir: where the SQLite files live; default ``./runs/cache/text2sql/<db_seed>``.
        question_kinds: only these kinds of question (e.g. for a curriculum); default all.
        questions_file: a JSONL file of questions written by hand (:mod:`.handwritten`'s format, on
            the bank's schemas) posed instead of the split's generated ones: e.g. a dev set that
            cloning stops early on.
        validity_penalty: subtracted when the assembled query is not valid SQL.
        length_cost: per SQL token beyond the gold query's length.
        sql_timeout_s: wall-time limit of one query.
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the question and the last query).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "text2sql_v0",
        "render_modes": ["ansi"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        split: str = "train",
        db_seed: int = 0,
        data_dir: str | Path | None = None,
        question_kinds: Sequence[str] | None = None,
        questions_file: str | Path | None = None,
        validity_penalty: float = 0.2,
        length_cost: float = 0.005,
        sql_timeout_s: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        if split not in SPLITS:
            raise ValueError(f"unknown split '{split}' (choose from {', '.join(SPLITS)})")
        unknown = set(question_kinds or ()) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown question kinds {sorted(unknown)} (known: {', '.join(KINDS)})")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.split = split
        self.bank: QuestionBank = load_bank(int(db_seed), data_dir)
        kinds = set(question_kinds or KINDS)
        posed = self.bank.questions(split) if questions_file is None else self._handwritten(questions_file)
        self.questions: tuple[Question, ...] = tuple(
            q for q in posed if question_kinds is None or q.kind in kinds
        )
        if not self.questions:
            raise ValueError(f"split '{split}' has no questions of kinds {sorted(kinds)}")
        self.validity_penalty = float(validity_penalty)
        self.length_cost = float(length_cost)
        self.sql_timeout_s = float(sql_timeout_s)
        self.render_mode = render_mode

        self.possible_agents = list(act.AGENTS)
        self.agents: list[str] = []
        self._action_spaces = act.action_spaces()
        obs_box = spaces.Box(0.0, observation_high(), shape=(OBS_DIM,), dtype=np.float32)
        self._observation_spaces = {
            agent: spaces.Dict(
                {
                    OBS_KEY: obs_box,
                    MASK_KEY: spaces.Box(0.0, 1.0, shape=(int(sum(act.NVEC[agent])),), dtype=np.float32),
                }
            )
            for agent in self.possible_agents
        }
        self._rng = np.random.default_rng()
        self._runners: dict[str, SQLRunner] = {}
        self._encoded: dict[str, dict[str, dict[str, np.ndarray]]] = {}
        self._question: Question | None = None
        self._last: dict[str, Any] | None = None
        self._written: Written | None = None

    def _handwritten(self, path: str | Path) -> list[Question]:
        from orchestrl.envs.text2sql.handwritten import load_handwritten

        if not Path(path).is_file():
            raise ValueError(f"questions_file: {path} is not a file")
        return load_handwritten(path, self.bank)

    # --- PettingZoo API -----------------------------------------------------------------------

    def observation_space(self, agent: str) -> spaces.Space:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Starts an episode on a random question of the split, or on ``options["question_index"]``."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            for i, agent in enumerate(self.possible_agents):
                self._action_spaces[agent].seed(seed + i)
        index = (options or {}).get("question_index")
        if index is None:
            index = int(self._rng.integers(len(self.questions)))
        self._question = self.questions[int(index)]
        self._last = None
        self.agents = list(self.possible_agents)
        info = {
            "question_id": self._question.qid,
            "question": self._question.text,
            "schema": self._question.schema,
        }
        return self._observations(), {agent: dict(info) for agent in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Assembles both agents' choices into SQL, runs it, and ends the episode."""
        if not self.agents or self._question is None:
            raise RuntimeError("step() called before reset() or after the episode ended")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"both agents act in the one step; missing actions for {missing}")
        question = self._question
        plan, sql, outcome = self._execute(question, actions)
        self._written = Written(
            question, {a: np.asarray(actions[a]).copy() for a in act.AGENTS}, outcome.reward
        )
        info = self._episode_info(question, plan, sql, outcome, actions)
        self._last = info
        observations = self._observations()
        rewards = {agent: outcome.reward for agent in self.agents}
        terminations = {agent: True for agent in self.agents}
        truncations = {agent: False for agent in self.agents}
        infos = {agent: {**info, "metrics": dict(info["metrics"])} for agent in self.agents}
        self.agents = []
        return observations, rewards, terminations, truncations, infos

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self._question is None:
            return None
        lines = [f"[{self._question.schema}] {self._question.text}", f"gold: {self._question.gold_sql}"]
        if self._last is not None:
            lines.append(f"team: {self._last['sql']}  -> reward {self._last['reward']:.2f}")
        return "\n".join(lines)

    def close(self) -> None:
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()

    # --- beyond PettingZoo --------------------------------------------------------------------

    @property
    def question(self) -> Question:
        """The current question (after ``reset``)."""
        if self._question is None:
            raise RuntimeError("call reset() first")
        return self._question

    def expert_actions(self) -> dict[str, np.ndarray]:
        """The gold decomposition of the current question, one action per agent."""
        return expert_actions(self.question)

    def counterfactual_spec(self) -> Written | None:
        """The last finished episode's question, actions and reward (None before the first)."""
        return self._written

    def counterfactual_edits(self, spec: Written, agent: str) -> tuple[EditFamily, ...]:
        """Only ``alternative``: an agent's action is a set of indices, with no base or edges."""
        return (EditFamily.ALTERNATIVE,)

    def counterfactual(self, spec: Written, agent: str, edit: Edit) -> CounterfactualOutcome:
        """The reward of the query written with ``agent``'s action swapped for ``edit.action``."""
        if edit.family is not EditFamily.ALTERNATIVE:
            raise EditNotApplicable(f"{edit.family}: a Text2SQL action has only alternatives")
        if agent not in spec.actions:
            raise ValueError(f"unknown agent {agent!r} (agents: {list(spec.actions)})")
        actions = {**spec.actions, agent: np.asarray(edit.action)}
        _, _, outcome = self._execute(spec.question, actions)
        return CounterfactualOutcome(outcome.reward, spec.reward, {"success": float(outcome.success)})

    def evaluate_sql(self, sql: str) -> Score:
        """Scores any SQL text against the current question as ``step`` would (e.g. an LLM's query)."""
        result = self._runner(self.question.schema).run(sql)
        return score(sql, result, self.question, self.validity_penalty, self.length_cost)

    # --- internals ----------------------------------------------------------------------------

    def _execute(self, question: Question, actions: dict[str, Any]) -> tuple[QueryPlan, str | None, Score]:
        """Both agents' actions as one query, run on the question's database and scored."""
        schema = SCHEMAS[question.schema]
        values = self.bank.values[question.schema]
        plan = act.decode(actions[act.EXTRACTOR], actions[act.COMPOSER], question.words, schema, values)
        sql, result, plan_error = None, None, None
        try:
            sql = render_sql(plan, schema)
        except PlanError as exc:
            plan_error = str(exc)
            log.info("no SQL for %s: %s", question.qid, exc)
        if sql is not None:
            result = self._runner(question.schema).run(sql)
        return plan, sql, score(sql, result, question, self.validity_penalty, self.length_cost, plan_error)

    def _runner(self, schema: str) -> SQLRunner:
        if schema not in self._runners:
            self._runners[schema] = SQLRunner(self.bank.db_paths[schema], timeout_s=self.sql_timeout_s)
        return self._runners[schema]

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        question = self.question
        if question.qid not in self._encoded:
            schema = SCHEMAS[question.schema]
            vector = encode_observation(question.words, schema, self.bank.values[question.schema])
            masks = act.action_masks(len(question.words), schema)
            self._encoded[question.qid] = {
                a: {OBS_KEY: vector, MASK_KEY: masks[a]} for a in self.possible_agents
            }
        cached = self._encoded[question.qid]
        return {a: {k: v.copy() for k, v in cached[a].items()} for a in self.possible_agents}

    def _episode_info(
        self, question: Question, plan: QueryPlan, sql: str | None, outcome: Score, actions: dict[str, Any]
    ) -> dict[str, Any]:
        span = None
        if plan.where:
            composer = np.asarray(actions[act.COMPOSER]).reshape(-1)
            span = (int(composer[2]), int(composer[3]) + 1)
        accuracy = _slot_accuracy(question, actions)
        return {
            "question_id": question.qid,
            "question": question.text,
            "schema": question.schema,
            "kind": question.kind,
            "unseen_phrasing": question.unseen_phrasing,
            "sql": sql,
            "gold_sql": question.gold_sql,
            "slots": act.describe(plan, SCHEMAS[question.schema], span),
            "error": outcome.error,
            "error_kind": outcome.error_kind,
            "reward": outcome.reward,
            "metrics": {
                "success": float(outcome.success),
                "valid_sql": float(outcome.valid),
                "sql_tokens": float(outcome.sql_tokens),
                "excess_tokens": float(outcome.excess_tokens),
                "timeout": float(outcome.error_kind == "timeout"),
                "extractor_slot_acc": accuracy[act.EXTRACTOR],
                "composer_slot_acc": accuracy[act.COMPOSER],
            },
        }


@dataclass(frozen=True)
class Written:
    """What an episode executed: its question, each agent's action and the reward it got."""

    question: Question
    actions: dict[str, np.ndarray]
    reward: float


def _slot_accuracy(question: Question, actions: dict[str, Any]) -> dict[str, float]:
    """Per agent, the fraction of its components that equal the expert's, counting only components
    the gold query uses (the composer's operator and value only matter with a WHERE)."""
    gold = expert_actions(question)
    out = {}
    for agent in act.AGENTS:
        chosen = np.asarray(actions[agent]).reshape(-1)
        relevant = [
            i
            for i, name in enumerate(act.COMPONENTS[agent])
            if question.plan.where or name not in ("op", "value_start", "value_length")
        ]
        out[agent] = float(np.mean([chosen[i] == gold[agent][i] for i in relevant]))
    return out
