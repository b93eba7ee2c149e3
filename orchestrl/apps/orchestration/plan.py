"""``orchestrl plan`` and ``POST /plan``: a trained LEMON team writes a pipeline for a user's own tables.

The user brings what the orchestration envs call public inputs: source tables (the fact table
first, the table every other one joins to) and a few rows of the table they want, whose columns are
its schema. The team sees them exactly as it saw a training task's. A planning team
(``orchestration_planning``, :mod:`orchestrl.envs.orchestration.planning`) gets them through the
env's own ``files_task``: the synthesiser's proposer lists each agent's options from them, as it
did for every generated task. A level team (``orchestration``) gets them through
:func:`~orchestrl.envs.orchestration.byexample.public_task`, which proposes the level's candidate
duties. The env (rebuilt from the run's config) observes them, and the checkpoint's greedy policy
(:class:`~orchestrl.experiment.policy.TrainedPolicy`) writes the spec. The spec runs in the sandbox
and is checked against the example rows: the right columns and every example row in the output.

- **Every round.** The team plays its rounds as in training: after round 1 each agent sees its own
  node's outcome and how the output compares with the example rows (the env's round-2 feedback).
  The output's row-count ratio needs the wanted table's row count, which the examples do not give:
  ``target_rows`` when the user knows it, else a ratio of 1 (no signal). The final round's spec is
  the team's.
- **Fallback.** When the team's spec is invalid, fails, or does not hold the examples (or there is
  no team: ``plan`` without a checkpoint), the synthesiser
  (:func:`~orchestrl.envs.orchestration.synthesis.synthesise`: cleaning, joins and filters proposed
  from the data, the output's shape, order and rounding deduced from the example rows) searches
  in this process on the public inputs, and its pipeline runs once in the sandbox; the result
  says which of the two wrote the spec. When neither matches, the solver's attempt (none when it
  found no pipeline) comes back with ``ok`` false and the team's check beside it.
- **In words.** The user may say what they want (``description``). The synthesiser reads the
  values, bounds ("3 hours or more") and columns ("no count") it names as filters the example rows
  cannot show (:mod:`~orchestrl.envs.orchestration.synthesis.request`); the team does not read it.
- **Limits** (:func:`limits_for`): the tables, target columns and example rows a level team's
  observation has room for (a planning team takes what the synthesiser takes), and the table size
  :data:`MAX_ROWS`/:data:`MAX_COLUMNS` this command accepts so that one sandbox job stays within
  its CPU budget. Input beyond them is refused with one line naming the limit; nothing is written.

Passing the examples is what can be checked without a hidden target: several pipelines may hold
every example row and still differ on rows the examples do not show.
"""

from __future__ import annotations

import csv
import io
import json
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from orchestrl.deploy.endpoints import RequestError, ServedTeam, remaining_s
from orchestrl.experiment.policy import TrainedPolicy

if TYPE_CHECKING:
    from orchestrl.deploy.team import TrainedTeam
    from orchestrl.envs.orchestration.byexample import ExampleCheck

MAX_ROWS = 200_000
"""Rows per table, so that one sandbox job of a level-4 pipeline (8 nodes at the large capacity)
stays within the sandbox's CPU budget (``benchmarks/sandbox.py`` prints the per-row cost model)."""
MAX_COLUMNS = 64
"""Columns per table: candidate proposal profiles every column of every table."""
MAX_DESCRIPTION_CHARS = 2_000
"""Characters of the request in words (a few sentences)."""
PIPELINE_FILE = "pipeline.py"
SPEC_FILE = "spec.yaml"
DATA_DIR = "data"
RESULT_FILE = "plan.json"


class PlanInputError(ValueError):
    """Input the team cannot plan for; ``field`` names the culprit (a table, ``target_example``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Limits:
    """What a team of one orchestration level can take."""

    tables: int
    target_columns: int
    example_rows: int
    rows: int = MAX_ROWS
    columns: int = MAX_COLUMNS


SEARCH_LIMITS = Limits(tables=3, target_columns=MAX_COLUMNS, example_rows=50)
"""What the synthesiser alone (no team) takes."""


def limits_for(level: int | None) -> Limits:
    """The limits of a level's team (the observation's fixed layout, module docstring), or of the
    synthesiser alone (``level`` None)."""
    from orchestrl.envs.orchestration.features import MAX_EXAMPLES, TARGET_COLUMNS
    from orchestrl.envs.orchestration.tasks import LEVELS

    if level is None:
        return SEARCH_LIMITS
    return Limits(tables=LEVELS[level].max_sources, target_columns=TARGET_COLUMNS, example_rows=MAX_EXAMPLES)


def check_limits(sources: Mapping[str, pd.DataFrame], examples: pd.DataFrame, limits: Limits) -> None:
    """Raises :class:`PlanInputError` for the first input beyond ``limits``."""
    if not sources:
        raise PlanInputError("sources", "give at least one table")
    if len(sources) > limits.tables:
        raise PlanInputError("sources", f"{len(sources)} tables; this team takes at most {limits.tables}")
    from orchestrl.envs.orchestration.spec import IDENT

    for name in sources:
        if not re.match(IDENT, str(name)):
            raise PlanInputError(
                str(name), "a table's name is letters, digits and _, not starting with a digit"
            )
    for name, frame in {**sources, "target_example": examples}.items():
        if frame.empty or len(frame.columns) == 0:
            raise PlanInputError(name, "no rows")
        if len(frame) > limits.rows:
            raise PlanInputError(name, f"{len(frame):,} rows; the limit is {limits.rows:,}")
        if len(frame.columns) > limits.columns:
            raise PlanInputError(name, f"{len(frame.columns)} columns; the limit is {limits.columns}")
    if len(examples.columns) > limits.target_columns:
        raise PlanInputError(
            "target_example",
            f"{len(examples.columns)} columns; the team's observation has room for {limits.target_columns}",
        )
    if len(examples) > limits.example_rows:
        raise PlanInputError(
            "target_example",
            f"{len(examples)} rows; give at most {limits.example_rows} (the team reads that many)",
        )


def read_csv(field: str, text_or_path: str | Path, *, is_path: bool) -> pd.DataFrame:
    """A CSV file (or CSV text) as a DataFrame; :class:`PlanInputError` naming ``field`` otherwise:
    a missing or empty file, text that is not UTF-8, a header naming a column twice, or a row
    with more or fewer fields than the header (pandas would pad or shift it silently)."""
    if is_path:
        path = Path(text_or_path)
        if not path.is_file():
            raise PlanInputError(field, f"{path}: no such file")
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise PlanInputError(field, f"not UTF-8 text (byte {err.start}); save it as UTF-8 CSV") from None
    else:
        text = str(text_or_path)
    if not text.strip():
        raise PlanInputError(field, "empty: a CSV header and at least one row are needed")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as err:
        raise PlanInputError(field, f"not a CSV table ({err})") from None
    rows = [r for r in rows if r]
    header = rows[0]
    seen = set()
    for name in header:
        if not name.strip():
            raise PlanInputError(field, f"a column without a name (column {header.index(name) + 1})")
        if name in seen:
            raise PlanInputError(field, f"the column name {name!r} appears twice in the header")
        seen.add(name)
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise PlanInputError(field, f"row {line} has {len(row)} fields, the header has {len(header)}")
    try:
        return pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as err:
        raise PlanInputError(field, f"not a CSV table ({str(err).splitlines()[0]})") from None


@dataclass
class Plan:
    """A plan for one set of tables: the spec, its pipeline and how it matched the examples."""

    by: str
    """``team`` or ``solver`` (the fallback)."""
    spec_yaml: str | None
    pipeline: str | None
    match: ExampleCheck
    team: ExampleCheck | None
    """The team's own attempt (None when its actions did not make a valid spec)."""
    notes: list[str] = field(default_factory=list)
    solver_seconds: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "ok": self.match.ok,
            "spec": self.spec_yaml,
            "pipeline": self.pipeline,
            "match": check_json(self.match),
            "team": check_json(self.team) if self.team is not None else None,
            "notes": list(self.notes),
            "solver_seconds": self.solver_seconds,
        }

    def summary(self) -> str:
        m = self.match
        lines = list(self.notes)
        lines.append(
            f"{'the team' if self.by == 'team' else 'the solver'}'s spec: "
            + ("matches: it holds every example row" if m.ok else "does NOT match")
            + f" (columns {'match' if m.columns_match else 'differ'},"
            f" {m.examples_held:.0%} of the example rows, {m.rows} output rows"
            + (f" for {m.rows_expected} wanted)" if m.rows_expected is not None else ")")
        )
        return "\n".join(lines)


def check_json(check: ExampleCheck) -> dict[str, Any]:
    """An example check as JSON-ready data (``errors`` a list, as it comes back over HTTP)."""
    return {**asdict(check), "errors": list(check.errors)}


class Planner:
    """A trained orchestration team (or none: the synthesiser alone), ready to plan on users'
    tables (module docstring)."""

    def __init__(
        self,
        policy: TrainedPolicy | None = None,
        env_name: str = "orchestration",
        env_kwargs: Mapping[str, Any] | None = None,
        agent_id_in_obs: bool = False,
    ):
        from orchestrl.envs.registry import get_env
        from orchestrl.envs.rllib_env import RegisteredEnv, env_config

        self.policy = policy
        self.env: Any = None
        self.level: int | None = None
        if policy is not None:
            family = get_env(env_name).family
            if family != "orchestration":
                raise PlanInputError(
                    "checkpoint", f"a team of the '{family}' family cannot plan; train one on 'orchestration'"
                )
            self.env = RegisteredEnv(env_config(env_name, dict(env_kwargs or {}), agent_id_in_obs))
            self.raw = self.env.raw_env
            level = getattr(self.raw, "level", None)  # a planning team takes any export
            self.level = int(level) if level is not None else None
        self.limits = limits_for(self.level)

    @classmethod
    def from_team(cls, team: TrainedTeam) -> Planner:
        """The planner of a team found by :func:`orchestrl.deploy.team.find_team`."""
        env = team.config.env
        return cls(team.policy(team.rllib_config("train")), env.name, env.kwargs, env.agent_id_in_obs)

    @classmethod
    def from_served(cls, team: ServedTeam) -> Planner:
        env = team.experiment["env"]
        return cls(team.policy, env["name"], env.get("kwargs", {}), bool(env.get("agent_id_in_obs", False)))

    def close(self) -> None:
        if self.env is not None:
            self.env.close()

    def plan(
        self,
        sources: Mapping[str, pd.DataFrame],
        examples: pd.DataFrame,
        fallback: bool = True,
        target_rows: int | None = None,
        deadline: float | None = None,
        description: str | None = None,
    ) -> Plan:
        """The team's spec for ``sources`` and ``examples`` (module docstring), checked in the
        sandbox; ``target_rows``: the wanted table's row count, when known; ``deadline``: the
        ``time.monotonic()`` after which the synthesiser's search stops with what it has;
        ``description``: what the user wants, in their words (the synthesiser, and a planning team,
        read the values, bounds and columns it names as filters)."""
        from orchestrl.envs.orchestration import byexample
        from orchestrl.envs.orchestration.synthesis import synthesise
        from orchestrl.envs.orchestration.synthesis.evidence import unproducible

        check_limits(sources, examples, self.limits)
        if description is not None and len(description) > MAX_DESCRIPTION_CHARS:
            raise PlanInputError(
                "description", f"{len(description):,} characters; the limit is {MAX_DESCRIPTION_CHARS:,}"
            )
        for name in unproducible(dict(sources), examples):
            sample = ", ".join(repr(str(v)) for v in examples[name].dropna().unique()[:3])
            raise PlanInputError(
                "target_example",
                f"column {name!r}: no source column holds its values ({sample}); only numbers are computed",
            )
        files_task = getattr(self.raw, "files_task", None) if self.policy is not None else None
        try:
            if files_task is not None:
                task = files_task(sources, examples, description)
            else:
                task = byexample.public_task(sources, examples, level=self.level)
        except ValueError as err:
            raise PlanInputError("sources", str(err)) from None
        notes: list[str] = []
        with byexample.sandbox_executor() as executor:
            team_check = None
            if self.policy is not None:
                spec, errors = self.team_spec(task, target_rows)
                if spec is None:
                    notes.append(f"the team's actions make no valid spec ({', '.join(errors) or 'invalid'})")
                else:
                    team_check = byexample.check_examples(task, spec, executor, target_rows)
                    if team_check.ok or not fallback:
                        return self._plan("team", spec, team_check, team_check, notes)
                    failed = f" ({', '.join(team_check.errors)})" if team_check.errors else ""
                    notes.append(f"the team's spec does not match{failed}; the solver steps in")
                if not fallback:
                    return Plan("team", None, None, byexample.NOTHING_RAN, None, notes)
            found = synthesise(sources, examples, target_rows, deadline=deadline, description=description)
            if found.spec is None:
                unexplained = found.notes or ["no pipeline it tried holds every example row"]
                notes.append("the solver found no plan: " + "; ".join(unexplained))
                best = team_check or byexample.NOTHING_RAN
                return Plan("solver", None, None, best, team_check, notes, found.seconds)
            check = byexample.check_examples(task, found.spec, executor, target_rows)
            plan = self._plan("solver", found.spec, check, team_check, notes)
            plan.solver_seconds = found.seconds
            return plan

    def team_spec(self, task: Any, target_rows: int | None) -> tuple[Any, list[str]]:
        """The spec the team writes in its final round (None when invalid) and its error codes."""
        options: dict[str, Any] = {"task": task, "target_rows": target_rows}
        obs, _ = self.env.reset(options=options)
        infos: dict[str, Any] = {}
        for _ in range(self.raw.rounds):
            obs, _, terminated, truncated, infos = self.env.step(self.policy.act(obs))
            if terminated.get("__all__") or truncated.get("__all__"):
                break
        last = next((i for i in infos.values() if isinstance(i, dict)), {})
        return self.raw.counterfactual_spec(), list(last.get("spec_errors", []))

    @staticmethod
    def _plan(by: str, spec: Any, check: ExampleCheck, team: ExampleCheck | None, notes: list[str]) -> Plan:
        from orchestrl.envs.orchestration.byexample import compile_spec

        return Plan(by, spec.to_yaml(), compile_spec(spec).source, check, team, notes)


def write_plan(plan: Plan, sources: Mapping[str, pd.DataFrame], out: Path) -> list[Path]:
    """Writes ``spec.yaml``, ``pipeline.py``, ``plan.json`` and the sources (``data/<name>.csv``,
    what ``python pipeline.py --data out/data`` reads) under ``out``; returns the files."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if plan.spec_yaml is not None and plan.pipeline is not None:
        (out / SPEC_FILE).write_text(plan.spec_yaml)
        (out / PIPELINE_FILE).write_text(plan.pipeline)
        written += [out / SPEC_FILE, out / PIPELINE_FILE]
        data = out / DATA_DIR
        data.mkdir(exist_ok=True)
        for name, frame in sources.items():
            frame.to_csv(data / f"{name}.csv", index=False)
            written.append(data / f"{name}.csv")
    (out / RESULT_FILE).write_text(json.dumps(plan.as_json(), indent=1))
    written.append(out / RESULT_FILE)
    return written


MAX_NAME_CHARS = 128
"""Characters of a table's name in a ``POST /plan`` (names come back in errors and the spec)."""


class PlanEndpoint:
    """``POST /plan``: ``{"sources": {name: CSV text, ...}, "target_example": CSV text}`` (the fact
    table first; optional ``"target_rows"`` and ``"description"``, what the user wants in words)
    -> ``{"by", "ok", "spec", "pipeline", "match", "team", "notes"}``.

    A table beyond the server's ``table_rows`` or ``table_columns``
    (:class:`~orchestrl.deploy.limits.ServeLimits`) is 413 (columns are counted on the CSV's header
    before it is parsed); beyond what the team's level takes (tables, target columns, example rows)
    400. The work is bounded: each pipeline stops at the sandbox's CPU and wall limits, and the
    solver's search at its budget of executions or at the request's time limit, whichever first."""

    path = "/plan"
    summary = "your tables as CSV + a target example -> spec, pipeline.py"

    def __init__(self, team: ServedTeam) -> None:
        self.planner = Planner.from_served(team)
        self.rows, self.columns = team.limits.table_rows, team.limits.table_columns
        self.planner.limits = replace(self.planner.limits, rows=self.rows, columns=self.columns)

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        rows = body.get("target_rows")
        if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 1):
            raise RequestError("target_rows", "expected a positive integer (the wanted table's row count)")
        tables = body.get("sources")
        if not isinstance(tables, Mapping) or not tables:
            raise RequestError(
                "sources", "required: an object of table name -> CSV text (the fact table first)"
            )
        example = body.get("target_example")
        if not isinstance(example, str) or not example.strip():
            raise RequestError("target_example", "required: CSV text of a few rows of the wanted table")
        description = body.get("description")
        if description is not None and not isinstance(description, str):
            raise RequestError("description", "expected text: what you want, in your words")
        try:
            sources = {}
            for name, text in tables.items():
                if len(name) > MAX_NAME_CHARS:
                    raise RequestError("sources", f"a table name longer than {MAX_NAME_CHARS} characters")
                if not isinstance(text, str):
                    raise PlanInputError(f"sources.{name}", "expected CSV text")
                sources[str(name)] = self.table(f"sources.{name}", text)
            examples = self.table("target_example", example)
            if remaining_s() <= 0:
                raise RequestError("request", "no time left to plan (the server's time limit)", status=504)
            left = remaining_s()
            deadline = time.monotonic() + left if left != float("inf") else None
            plan = self.planner.plan(
                sources, examples, target_rows=rows, deadline=deadline, description=description
            )
        except PlanInputError as err:
            known = ("sources", "target_example", "description")
            field = err.field if err.field.startswith(known) else f"sources.{err.field}"
            raise RequestError(field, err.message) from None
        return plan.as_json()

    def table(self, field: str, text: str) -> pd.DataFrame:
        """CSV text as a table within the server's limits (413 beyond them)."""
        try:
            header = next(csv.reader(io.StringIO(text)), [])
        except csv.Error:
            header = []  # pandas says what is wrong with it
        if len(header) > self.columns:
            raise RequestError(field, f"{len(header):,} columns; the limit is {self.columns}", status=413)
        frame = read_csv(field, text, is_path=False)
        if len(frame) > self.rows:
            raise RequestError(field, f"{len(frame):,} rows; the limit is {self.rows:,}", status=413)
        return frame
