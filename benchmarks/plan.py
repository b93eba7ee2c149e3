"""How `orchestrl plan` does on held-out tasks handed over as a user would: CSV files.

For each of ``--tasks`` held-out tasks of the checkpoint's level, the task's public inputs (its
source tables and example rows) go through a CSV round trip and
:class:`orchestrl.apps.orchestration.plan.Planner` (no hidden reference or target anywhere on that
path). The plan is then scored against the task's
hidden target, which ``plan`` itself never sees:

- ``holds_examples``: share of plans whose output has the target's columns and every example row
  (what ``plan`` reports as ``ok``); ``by_team``: share written by the team (the rest by the solver);
- ``success``: share whose output equals the hidden target (the env's success), with the team alone
  (``team_success``) and with the solver's fallback (``success``); the gap to ``holds_examples`` is
  the plans that hold every example and are still wrong;
- ``env_team_success``: the team's success on the same tasks as the env generates them (its own
  candidate order and domain), the figure evaluation reports;
- ``seconds_per_plan``: wall time per plan, fallback included.

Run:
    python benchmarks/plan.py --checkpoint runs/experiments/lemon_level1/<RUN_ID>/checkpoints/iter_000002

Expected: ``holds_examples`` at or above ``success`` (holding the example rows is weaker than
matching the hidden target). It needs a trained checkpoint, so no output of it is saved and
``benchmarks/RESULTS.md`` has none of its figures.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import time

import pandas as pd

from orchestrl.apps.orchestration.plan import Planner
from orchestrl.deploy.team import find_team
from orchestrl.envs.orchestration.spec import parse_spec
from orchestrl.envs.orchestration.tasks import generate_task


def as_user_would(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="a run id or checkpoint of an orchestration team")
    parser.add_argument("--tasks", type=int, default=30)
    args = parser.parse_args()
    team = find_team(args.checkpoint)
    planner = Planner.from_team(team)
    raw = planner.raw
    counts = dict.fromkeys(("holds_examples", "by_team", "team_success", "success", "env_team_success"), 0.0)
    planning = 0.0
    try:
        for seed in range(args.tasks):
            task = generate_task(planner.level, "heldout", seed)
            sources = {name: as_user_would(frame) for name, frame in task.sources.items()}
            started = time.perf_counter()
            plan = planner.plan(sources, as_user_would(task.public.examples))
            planning += time.perf_counter() - started
            env_spec, _ = planner.team_spec(task, None)
            raw.reset(options={"task": task})  # score on the hidden target from here on
            counts["env_team_success"] += raw.evaluate(env_spec).success if env_spec is not None else 0.0
            counts["holds_examples"] += plan.match.ok
            counts["by_team"] += plan.by == "team"
            if plan.spec_yaml is not None:
                success = raw.evaluate(parse_spec(plan.spec_yaml)).success
                counts["success"] += success
                counts["team_success"] += success if plan.by == "team" else 0.0
    finally:
        planner.close()
    out = {k: v / args.tasks for k, v in counts.items()}
    out.update(
        level=planner.level,
        tasks=args.tasks,
        seconds_per_plan=planning / args.tasks,
        checkpoint=str(team.checkpoint),
        loadavg=list(os.getloadavg()),
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
