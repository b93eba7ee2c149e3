"""How `orchestrl plan` does on exports as people bring them: the hand-made corpus, and the gap
between the env's generated tasks and the same tasks handed over as CSV files.

Corpora written by hand, not by the env's generator (see their READMEs):
``tests/data/plan_cases/`` (``dev``: the synthesiser was tuned while looking at it);
``tests/data/plan_cases_seen{,_b,_c,_d,_e,_f,_g,_h}/`` (``seen`` to ``seen_h``: earlier held-out sets,
each measured blind once, its figure kept in its README, then looked at and used for tuning); and
``tests/data/plan_cases_heldout/`` (``heldout``: written afterwards by someone who had not seen
the planner; its requests were read on 2026-12-05 while the reading of users' words was widened,
so its figures are no longer blind: exports nobody here has read say how ``plan`` does on new
ones). Per case: source CSVs, the
first rows of the wanted table (``target_example.csv``) and the whole wanted table
(``wanted.csv``), which ``plan`` never sees. Each case goes through
:class:`orchestrl.apps.orchestration.plan.Planner` as the CLI sends it (CSV files read by
``read_csv``), and the spec it returns runs on the sources and is compared with the wanted table:

- ``solver_exact``: share of cases where the synthesiser's output equals the wanted table (same
  columns in the same order, same rows; for cases marked ``ordered``, the rows in the wanted
  order), given the case's ``description`` as ``plan --description`` (the user's words);
  ``solver_holds_examples``: share whose output held every example row (what ``plan`` reports as
  ``ok``: the gap to ``solver_exact`` is plans that hold the examples and are wrong);
  ``solver_exact_examples_only``: ``solver_exact`` without the description;
- ``team_exact`` (with ``--checkpoint``): the same for the team's own spec, no fallback, given the
  same description (a planning team reads the filters it names); ``team_exact_examples_only``:
  without it; ``team_executions_per_case``: the scored executions the team spends (its rounds);
- ``solver_executions_per_case``: sandbox executions of whole pipelines (the synthesiser searches
  in process on the public inputs and runs its answer once);
- ``seconds_per_case``: wall time of ``plan`` per case;
- ``env_vs_files_gap``: on ``--tasks`` generated held-out tasks per level (and of the planning env,
  ``planning``), the synthesiser's success (output equals the hidden target) on the env's in-memory
  tables minus its success on the same tables after a CSV round trip (what a user's export looks
  like to ``plan``). A planning team's observation of a task through CSV files is the env's
  (``tests/envs/orchestration/test_planning_env.py``).

Run:
    python benchmarks/plan.py                                  # the synthesiser alone (both corpora)
    python benchmarks/plan.py --checkpoint <run id or folder>  # and a trained team
    python benchmarks/plan.py --corpora my_exports/ --no-env-gap  # cases of your own, same format

Figures: ``benchmarks/RESULTS.md``, section "Planning on users' exports".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from orchestrl.apps.orchestration.plan import Planner, read_csv
from orchestrl.envs.orchestration.plans import run_spec
from orchestrl.envs.orchestration.spec import parse_spec
from orchestrl.envs.orchestration.synthesis import synthesise
from orchestrl.envs.orchestration.tables import TargetIndex, canonical_column

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
CORPORA = {
    "dev": DATA / "plan_cases",
    "seen": DATA / "plan_cases_seen",
    "seen_b": DATA / "plan_cases_seen_b",
    "seen_c": DATA / "plan_cases_seen_c",
    "seen_d": DATA / "plan_cases_seen_d",
    "seen_e": DATA / "plan_cases_seen_e",
    "seen_f": DATA / "plan_cases_seen_f",
    "seen_g": DATA / "plan_cases_seen_g",
    "seen_h": DATA / "plan_cases_seen_h",
    "heldout": DATA / "plan_cases_heldout",
}


def load_case(folder: Path) -> dict[str, Any]:
    """A corpus case as ``plan`` reads it: sources and examples through ``read_csv``."""
    meta = json.loads((folder / "case.json").read_text())
    sources = {name: read_csv(name, folder / f"{name}.csv", is_path=True) for name in meta["sources"]}
    return {
        "name": folder.name,
        "sources": sources,
        "examples": read_csv("target_example", folder / "target_example.csv", is_path=True),
        "wanted": read_csv("wanted", folder / "wanted.csv", is_path=True),
        "ordered": bool(meta.get("ordered", False)),
        "description": meta.get("description"),
        "target_rows": meta.get("target_rows"),
    }


def corpus_path(name: str) -> Path | None:
    """The corpus ``name`` names, or the folder ``name`` when it holds cases (None: neither)."""
    if name in CORPORA:
        return CORPORA[name]
    folder = Path(name)
    return folder if folder.is_dir() and any(folder.glob("*/case.json")) else None


def cases(corpus: Path) -> list[dict[str, Any]]:
    return [load_case(f) for f in sorted(corpus.iterdir()) if (f / "case.json").is_file()]


def exact(output: pd.DataFrame | None, wanted: pd.DataFrame, ordered: bool) -> bool:
    """The output is the wanted table: columns in order, the same rows (in order when ``ordered``)."""
    if output is None or [str(c) for c in output.columns] != [str(c) for c in wanted.columns]:
        return False
    if not TargetIndex(wanted).compare(output).exact:
        return False
    if not ordered:
        return True
    out, want = output.reset_index(drop=True), wanted.reset_index(drop=True)
    return all(
        np.allclose(canonical_column(out[c]), canonical_column(want[c]), equal_nan=True)
        if canonical_column(want[c]).dtype == np.float64
        else bool((canonical_column(out[c]) == canonical_column(want[c])).all())
        for c in want.columns
    )


def score(case: dict[str, Any], spec_yaml: str | None) -> bool:
    if spec_yaml is None:
        return False
    run = run_spec(case["sources"], parse_spec(spec_yaml))
    return exact(run.output, case["wanted"], case["ordered"])


def corpus_figures(corpus: Path, planner: Planner, team: Planner | None) -> dict[str, Any]:
    rows = []
    for case in cases(corpus):
        started = time.perf_counter()
        sources, examples, size = case["sources"], case["examples"], case["target_rows"]
        plan = planner.plan(sources, examples, target_rows=size, description=case["description"])
        seconds = time.perf_counter() - started
        alone = planner.plan(sources, examples, target_rows=size)
        row = {
            "case": case["name"],
            "solver_exact": score(case, plan.spec_yaml),
            "holds_examples": plan.match.ok,
            "solver_exact_examples_only": score(case, alone.spec_yaml),
            "seconds": round(seconds, 2),
        }
        if team is not None:
            for key, words in (("team_exact", case["description"]), ("team_exact_examples_only", None)):
                own = team.plan(sources, examples, fallback=False, target_rows=size, description=words)
                row[key] = score(case, own.spec_yaml)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    n = max(len(rows), 1)
    out: dict[str, Any] = {
        "cases": len(rows),
        "solver_exact": sum(r["solver_exact"] for r in rows) / n,
        "solver_holds_examples": sum(r["holds_examples"] for r in rows) / n,
        "solver_exact_examples_only": sum(r["solver_exact_examples_only"] for r in rows) / n,
        "solver_executions_per_case": 1.0,
        "seconds_per_case": round(sum(r["seconds"] for r in rows) / n, 2),
        "per_case": rows,
    }
    if team is not None:
        out["team_exact"] = sum(r["team_exact"] for r in rows) / n
        out["team_exact_examples_only"] = sum(r["team_exact_examples_only"] for r in rows) / n
        out["team_executions_per_case"] = float(team.raw.rounds)
    return out


def as_user_would(frame: pd.DataFrame) -> pd.DataFrame:
    return read_csv("table", frame.to_csv(index=False), is_path=False)


def env_gap(tasks: int, levels: list[int]) -> dict[str, Any]:
    """The synthesiser on generated held-out tasks: in-memory tables against the same tables
    after a CSV round trip (success: output equals the hidden target)."""
    from orchestrl.envs.orchestration.tasks import generate_task

    per_level = {}
    for level in levels:
        env_hits = file_hits = 0
        for seed in range(tasks):
            task = generate_task(level, "heldout", seed)
            index = TargetIndex(task.target)
            public = task.public
            for files in (False, True):
                sources = {n: as_user_would(f) if files else f for n, f in public.sources.items()}
                examples = as_user_would(public.examples) if files else public.examples
                spec = synthesise(sources, examples).spec
                output = None if spec is None else run_spec(public.sources, spec).output
                hit = output is not None and index.compare(output).exact
                if files:
                    file_hits += hit
                else:
                    env_hits += hit
        per_level[str(level)] = {"env": env_hits / tasks, "files": file_hits / tasks}
    per_level["planning"] = planning_gap(tasks)
    gaps = [v["env"] - v["files"] for v in per_level.values()]
    return {"env_vs_files_gap": max(gaps, default=0.0), "env_solver_success": per_level}


def planning_gap(tasks: int) -> dict[str, float]:
    """The same for the planning env's generated held-out tasks (``orchestration_planning``)."""
    from orchestrl.envs.orchestration.planning.env import same_output
    from orchestrl.envs.orchestration.planning.grammar import generate

    hits = {False: 0, True: 0}
    for seed in range(tasks):
        task = generate("heldout", seed)
        for files in (False, True):
            sources = {n: as_user_would(f) if files else f for n, f in task.sources.items()}
            examples = as_user_would(task.examples) if files else task.examples
            spec = synthesise(sources, examples).spec
            hits[files] += spec is not None and same_output(run_spec(task.sources, spec).output, task.target)
    return {"env": hits[False] / tasks, "files": hits[True] / tasks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a run id or checkpoint of an orchestration team")
    parser.add_argument("--tasks", type=int, default=20, help="generated tasks per level for the env gap")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument(
        "--corpora",
        nargs="+",
        default=list(CORPORA),
        help=f"corpus names ({', '.join(CORPORA)}) or folders of cases of your own, in the same format",
    )
    parser.add_argument("--no-env-gap", action="store_true", help="the corpora only")
    args = parser.parse_args()
    corpora = {name: corpus_path(name) for name in args.corpora}
    if None in corpora.values():
        bad = next(name for name, path in corpora.items() if path is None)
        parser.error(f"--corpora: {bad}: neither a corpus name nor a folder holding cases (<case>/case.json)")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    planner = Planner()
    team = None
    if args.checkpoint:
        from orchestrl.deploy.team import find_team

        team = Planner.from_team(find_team(args.checkpoint))
    out: dict[str, Any] = {}
    try:
        for name, corpus in corpora.items():
            figures = corpus_figures(corpus, planner, team)
            shown = corpus.relative_to(DATA.parents[0]) if corpus.is_relative_to(DATA.parents[0]) else corpus
            out[name] = {"corpus": str(shown), **figures}
    finally:
        planner.close()
        if team is not None:
            team.close()
    if not args.no_env_gap:
        out.update(env_gap(args.tasks, args.levels))
    out["tasks_per_level"] = args.tasks
    out["checkpoint"] = args.checkpoint
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
