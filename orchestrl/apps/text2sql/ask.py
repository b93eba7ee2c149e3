"""``orchestrl ask``: a trained NeuroMAS Text2SQL team answers a question about any SQLite file.

The file is opened read-only (``mode=ro``, :mod:`orchestrl.envs.text2sql.sql_runner`) for its schema
(:mod:`orchestrl.envs.text2sql.introspect`), its stored values (value linking,
:mod:`orchestrl.envs.text2sql.values`) and the query; nothing is ever written to it. The team sees
exactly what the env would show it: the observation is built by the env's own
:func:`~orchestrl.envs.text2sql.observation.encode_observation`, the greedy joint action is decoded
by the env's :func:`~orchestrl.envs.text2sql.actions.decode`, and the SQL runs through the env's
guarded :class:`~orchestrl.envs.text2sql.sql_runner.SQLRunner`.

Example::

    team = Team.load("runs/.../checkpoints/iter_000010")
    answer = team.ask(Database.open("shop.sqlite"), "How many products cost more than 30?")
    print(answer.sql, answer.rows)

:class:`AskEndpoint` is the same over HTTP: ``POST /ask`` on ``orchestrl serve CKPT --database
NAME=FILE.sqlite`` (:mod:`orchestrl.deploy.serve`), ``{"question": "...", "database": "NAME"}`` ->
``{"sql": "...", "rows": [[...], ...], "error": null}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from orchestrl.deploy.endpoints import RequestError, ServedTeam, remaining_s
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY
from orchestrl.envs.text2sql import actions as act
from orchestrl.envs.text2sql.introspect import schema_from_sqlite
from orchestrl.envs.text2sql.observation import OBS_DIM, LimitError, check_question, encode_observation
from orchestrl.envs.text2sql.query import Op, PlanError, QueryPlan, render_sql
from orchestrl.envs.text2sql.schemas import Schema
from orchestrl.envs.text2sql.sql_runner import SQLResult, SQLRunner
from orchestrl.envs.text2sql.tokenizer import split_words
from orchestrl.envs.text2sql.values import ValueIndex

BATCH = 256
"""Questions per forward pass."""


class CheckpointError(ValueError):
    """The checkpoint holds no NeuroMAS Text2SQL team."""


@dataclass(frozen=True)
class Database:
    """A SQLite file the team can be asked about: its schema and stored values, read read-only."""

    path: Path
    schema: Schema
    values: ValueIndex

    @classmethod
    def open(cls, path: Path | str) -> Database:
        """Raises ``FileNotFoundError`` or :class:`~orchestrl.envs.text2sql.observation.LimitError`
        (one line naming the limit) for a file the action space cannot hold."""
        schema = schema_from_sqlite(path)
        return cls(Path(path), schema, ValueIndex.from_database(path, schema))


@dataclass(frozen=True)
class Answer:
    question: str
    sql: str | None
    rows: tuple[tuple[Any, ...], ...] = ()
    error: str | None = None
    """Why there are no rows: the team's choices made no SQL, or SQLite rejected it."""


def observation_batch(
    words: Sequence[Sequence[str]], schemas: Sequence[Schema], values: Sequence[ValueIndex]
) -> dict[str, Any]:
    """The team's observation of each question (``words[i]`` over ``schemas[i]``), as a batch."""
    from orchestrl.algorithms.neuromas.team_env import TIME_KEY

    obs: dict[str, dict[str, list[np.ndarray]]] = {a: {OBS_KEY: [], MASK_KEY: []} for a in act.AGENTS}
    for question, schema, index in zip(words, schemas, values, strict=True):
        vector = encode_observation(question, schema, index)
        masks = act.action_masks(len(question), schema)
        for a in act.AGENTS:
            obs[a][OBS_KEY].append(vector)
            obs[a][MASK_KEY].append(masks[a])
    batch: dict[str, Any] = {
        a: {k: torch.as_tensor(np.stack(v)) for k, v in parts.items()} for a, parts in obs.items()
    }
    batch[TIME_KEY] = torch.zeros(len(words), 1)
    return batch


class Team:
    """A trained NeuroMAS team module that writes Text2SQL queries (greedy joint action)."""

    def __init__(self, module: Any, name: str = "the module", constrained: bool = True) -> None:
        net = getattr(module, "net", None)
        agents = tuple(net.spec.agents) if net is not None else ()
        if agents != act.AGENTS:
            raise CheckpointError(
                f"{name}: not a NeuroMAS Text2SQL team (its agents: {list(agents) or 'none'})"
            )
        reads = {net.spec.obs_dims[a] for a in agents}
        if reads != {OBS_DIM}:
            raise CheckpointError(
                f"{name}: the team reads {sorted(reads)} observation values, this Text2SQL layout has "
                f"{OBS_DIM} "
                "(trained with another version: retrain it)"
            )
        self.module = module
        self.constrained = constrained
        """Constrained decoding: the WHERE column is one the question can give a value
        (:func:`~orchestrl.envs.text2sql.actions.where_mask`), the value the best-scored span that
        fits it (:func:`~orchestrl.envs.text2sql.actions.linked_span`), and a text column's operator
        = or !=. False: every component's own argmax."""

    @classmethod
    def load(cls, checkpoint: Path | str, constrained: bool = True) -> Team:
        """From an ``orchestrl train`` checkpoint or a saved team module directory."""
        from orchestrl.algorithms.neuromas.growth import load_module

        torch.set_num_threads(min(torch.get_num_threads(), 2))
        try:
            module = load_module(checkpoint)
        except FileNotFoundError as err:
            raise CheckpointError(str(err)) from None
        return cls(module, str(checkpoint), constrained)

    def plans(
        self, words: Sequence[Sequence[str]], schemas: Sequence[Schema], values: Sequence[ValueIndex]
    ) -> list[QueryPlan]:
        """The query the team writes for each question (``words[i]`` over ``schemas[i]``)."""
        from ray.rllib.core.columns import Columns

        plans: list[QueryPlan] = []
        for start in range(0, len(words), BATCH):
            chunk = range(start, min(start + BATCH, len(words)))
            batch = observation_batch(
                [words[i] for i in chunk], [schemas[i] for i in chunk], [values[i] for i in chunk]
            )
            if self.constrained:
                where = _component_slice(act.EXTRACTOR, "where")
                for k, i in enumerate(chunk):
                    allowed = act.where_mask(words[i], schemas[i], values[i])
                    batch[act.EXTRACTOR][MASK_KEY][k, where] *= torch.as_tensor(allowed)
            with torch.no_grad():
                logits = self.module.forward_inference({Columns.OBS: batch})[Columns.ACTION_DIST_INPUTS]
            env_logits = logits[:, : sum(self.module.env_lens)]
            joint = self.module.env_action_dist_cls().from_logits(env_logits).to_deterministic().sample()
            n_extractor, extractor_logits = len(act.NVEC[act.EXTRACTOR]), sum(act.NVEC[act.EXTRACTOR])
            for row, scores, i in zip(joint.numpy(), env_logits.numpy(), chunk, strict=True):
                extractor, composer = row[:n_extractor], row[n_extractor:].copy()
                if self.constrained:
                    composer = _fitting_value(
                        extractor,
                        composer,
                        scores[extractor_logits:],
                        words[i],
                        schemas[i],
                        values[i],
                    )
                plans.append(act.decode(extractor, composer, words[i], schemas[i], values[i]))
        return plans

    def ask(self, db: Database, question: str) -> Answer:
        """Answers one question about ``db``: the SQL and its rows (or why there are none)."""
        words = split_words(question)
        check_question(words)
        plan = self.plans([words], [db.schema], [db.values])[0]
        try:
            sql = render_sql(plan, db.schema)
        except PlanError as err:
            return Answer(question, None, error=str(err))
        with SQLRunner(db.path) as runner:
            result = runner.run(sql)
        return Answer(question, sql, result.rows, None if result.ok else result.error)


class AskEndpoint:
    """``POST /ask``: ``{"question": str, "database": name}`` -> ``{"sql", "rows", "error"}``.

    ``database`` names one of the files registered with ``orchestrl serve --database NAME=FILE``
    (:attr:`orchestrl.deploy.endpoints.ServedTeam.databases`); each replica opens them read-only
    once, so each path must be readable where the replicas run (on one machine: always); a name is
    a key, never a path. SQL that SQLite rejects, or choices that make no SQL, are an answer (200)
    with ``error`` set, not a bad request; so is a result beyond the server's ``result_rows`` (no
    rows then). A question beyond ``question_chars`` is 413; a query still running at the request's
    time limit is stopped by SQLite's progress handler and the request gets 504.
    """

    path = "/ask"
    summary = "a question about a --database -> SQL, rows"
    reads_databases = True

    @classmethod
    def check_database(cls, path: Path) -> None:
        """Raises ``ValueError`` (one line) for a file the team cannot be asked about."""
        try:
            Database.open(path)
        except FileNotFoundError as err:
            raise ValueError(str(err)) from None

    def __init__(self, served: ServedTeam) -> None:
        from orchestrl.algorithms.neuromas.team_env import TEAM

        self.team = Team(served.policy.module[TEAM], served.checkpoint)
        self.databases = {name: Database.open(path) for name, path in served.databases.items()}
        self.limits = served.limits

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        question, name = body.get("question"), body.get("database")
        if not isinstance(question, str) or not question.strip():
            raise RequestError("question", "required: the question, a non-empty string")
        if len(question) > self.limits.question_chars:
            limit = f"{len(question):,} characters; the limit is {self.limits.question_chars:,}"
            raise RequestError("question", limit, status=413)
        if not isinstance(name, str):
            raise RequestError("database", f"required: one of {sorted(self.databases)} (a string)")
        database = self.databases.get(name)
        if database is None:
            known = ", ".join(sorted(self.databases)) or "none; serve with --database NAME=FILE.sqlite"
            raise RequestError(
                "database", f"unknown database {name[:64]!r} (registered: {known})", status=404
            )
        words = split_words(question)
        try:
            check_question(words)
        except LimitError as err:
            raise RequestError("question", str(err)) from None
        plan = self.team.plans([words], [database.schema], [database.values])[0]
        try:
            sql = render_sql(plan, database.schema)
        except PlanError as err:
            return {"sql": None, "rows": [], "error": str(err)}
        result = self.run(database, sql)
        rows = [
            [value if not isinstance(value, bytes) else value.hex() for value in row] for row in result.rows
        ]
        return {"sql": sql, "rows": rows, "error": None if result.ok else result.error}

    def run(self, database: Database, sql: str) -> SQLResult:
        """``sql`` on ``database`` (read-only, at most ``result_rows`` rows) within the time the
        request has left: a query still running then is interrupted (504)."""
        left = remaining_s(default=self.limits.timeout_s)
        with SQLRunner(database.path, timeout_s=left, max_rows=self.limits.result_rows) as runner:
            result = runner.run(sql)
        if result.error_kind == "timeout":
            message = (
                f"the query ran past the server's time limit ({self.limits.timeout_s:g} s) and was stopped"
            )
            raise RequestError("request", message, status=504)
        return result


def _component_slice(agent: str, component: str) -> slice:
    """Where ``component`` of ``agent``'s action sits in its flat mask and logits."""
    k = act.COMPONENTS[agent].index(component)
    start = sum(act.NVEC[agent][:k])
    return slice(start, start + act.NVEC[agent][k])


def _fitting_value(
    extractor: np.ndarray,
    composer: np.ndarray,
    logits: np.ndarray,
    words: Sequence[str],
    schema: Schema,
    values: ValueIndex,
) -> np.ndarray:
    """The composer's action with its value span (and, on a text column, its operator) the
    best-scored choice that fits the WHERE column the extractor chose."""
    where = int(extractor[act.EXTRACTOR_COMPONENTS.index("where")])
    if not where:
        return composer
    names = act.COMPOSER_COMPONENTS
    part = {name: logits[_component_slice(act.COMPOSER, name)] for name in names}
    span = act.linked_span(where, part["value_start"], part["value_length"], words, schema, values)
    if span is not None:
        composer[names.index("value_start")], composer[names.index("value_length")] = span
    if not schema.columns[where - 1][1].numeric:
        equality = [int(Op.EQ), int(Op.NE)]
        composer[names.index("op")] = equality[int(np.argmax(part["op"][equality]))]
    return composer
