"""Live progress of sweeps and curricula, as Tune progress reporters.

Tune's ``CLIReporter`` prints a wide table of every trial with host addresses, all sampled keys
and inferred metrics, every few seconds. These subclasses keep its timing (``should_report``)
and its place in Tune's loop. What they print fits a terminal: one status line (trials running,
pending, done, errors; the best value of the sweep's metric so far), then a few rows with short
column names. For a curriculum stage, one line: the stage, its iteration, and the promotion
metric against its threshold.

Tune 2.60 uses these reporters only on its classic output path. :func:`classic_tune_output`
selects that path while a sweep runs (``RAY_AIR_NEW_OUTPUT=0``).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ray.tune import CLIReporter

from orchestrl.experiment.config import short_names


@contextlib.contextmanager
def classic_tune_output() -> Iterator[None]:
    """Tune's classic output engine (the one that calls ``progress_reporter``) while inside."""
    previous = os.environ.get("RAY_AIR_NEW_OUTPUT")
    os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("RAY_AIR_NEW_OUTPUT", None)
        else:
            os.environ["RAY_AIR_NEW_OUTPUT"] = previous


def fmt_value(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, list):
        return "x".join(str(v) for v in value) or "[]"
    return str(value)


def elapsed_str(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def best_trial(trials: Sequence[Any], metric: str, mode: str) -> tuple[Any, float] | None:
    """The trial whose last reported ``metric`` is best (or None before any result)."""
    scored = [(t, t.last_result.get(metric)) for t in trials if t.last_result]
    scored = [(t, float(v)) for t, v in scored if isinstance(v, int | float) and math.isfinite(v)]
    if not scored:
        return None
    return (max if mode == "max" else min)(scored, key=lambda tv: tv[1])


class SweepReporter(CLIReporter):
    """``[sweep NAME] 0:01:23 | 1 running, 2 pending, 3 done | best METRIC -55.2 (trial ...)``
    followed by at most ``max_rows`` rows: running trials first, then the best finished ones."""

    def __init__(
        self, name: str, metric: str, mode: str, params: Sequence[str], max_rows: int = 8, every_s: int = 10
    ) -> None:
        super().__init__(max_report_frequency=every_s, metric_columns={metric: metric})
        self.name = name
        self.sweep_metric = metric
        self.sweep_mode = mode
        self.params = list(params)
        self.max_rows = max_rows
        self.started = time.time()
        self._last: tuple = ()
        self._printed = 0.0

    def setup(self, *args: Any, **kwargs: Any) -> None:
        super().setup(*args, **kwargs)
        self.started = time.time()  # this run's start (a resumed sweep restores a pickled reporter)
        self._last, self._printed = (), 0.0

    def status_line(self, trials: Sequence[Any]) -> str:
        counts = {
            s: sum(t.status == s for t in trials) for s in ("RUNNING", "PENDING", "TERMINATED", "ERROR")
        }
        other = len(trials) - sum(counts.values())
        parts = [
            f"{counts['RUNNING']} running",
            f"{counts['PENDING'] + other} pending",
            f"{counts['TERMINATED']} done",
        ]
        if counts["ERROR"]:
            parts.append(f"{counts['ERROR']} errors")
        best = best_trial(trials, self.sweep_metric, self.sweep_mode)
        best_str = f" | best {self.sweep_metric} {best[1]:.4g} ({best[0].trial_id})" if best else ""
        return f"[sweep {self.name}] {elapsed_str(time.time() - self.started)} | {', '.join(parts)}{best_str}"

    def table(self, trials: Sequence[Any]) -> list[str]:
        names = short_names(self.params)
        sign = -1.0 if self.sweep_mode == "max" else 1.0

        def score(t: Any) -> float:
            v = (t.last_result or {}).get(self.sweep_metric)
            return sign * float(v) if isinstance(v, int | float) else math.inf

        order = sorted(trials, key=lambda t: (t.status != "RUNNING", score(t)))
        header = ["trial", "status", "iter", *names.values(), self.sweep_metric]
        rows = [
            [
                t.trial_id,
                t.status.lower(),
                str((t.last_result or {}).get("training_iteration", 0)),
                *(fmt_value(t.config.get(k)) for k in self.params),
                fmt_value((t.last_result or {}).get(self.sweep_metric, float("nan"))),
            ]
            for t in order[: self.max_rows]
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = [
            "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in [header, *rows]
        ]
        if len(order) > self.max_rows:
            lines.append(f"  ... {len(order) - self.max_rows} more")
        return lines

    def report(self, trials: list, done: bool, *sys_info: str) -> None:
        """Prints when something changed (a trial's state, iteration or value), else once a minute."""
        status, table = self.status_line(trials), self.table(trials)
        signature = (status.split(" | ", 1)[1], tuple(table))
        if done or signature != self._last or time.time() - self._printed >= 60:
            print("\n".join([status, *table]), flush=True)
            self._last, self._printed = signature, time.time()


class StageReporter(CLIReporter):
    """``[curriculum NAME] stage 2/3 n4 | iter 7 | METRIC -61.3 (promote at >= -55 x3, streak 1)``."""

    def __init__(
        self,
        curriculum: str,
        stage: str,
        index: int,
        total: int,
        rule: dict[str, Any] | None,
        budget: str,
        every_s: int = 5,
    ) -> None:
        super().__init__(max_report_frequency=every_s, metric_columns={"team_return_sum_mean": "return"})
        self.line_prefix = f"[curriculum {curriculum}] stage {index + 1}/{total} {stage}"
        self.rule = rule or {}
        self.budget = budget
        self.started = time.time()
        self._last = ""
        self._seen = float("nan")

    def setup(self, *args: Any, **kwargs: Any) -> None:
        super().setup(*args, **kwargs)
        self.started = time.time()

    def line(self, trials: Sequence[Any]) -> str:
        result = trials[0].last_result if trials and trials[0].last_result else {}
        parts = [self.line_prefix, f"iter {result.get('training_iteration', 0)}"]
        metric = self.rule.get("metric")
        if metric:
            value = self._seen = result.get(metric, self._seen)  # held-out metrics come every few iterations
            parts.append(
                f"{metric} {fmt_value(value)} (promote at >= {self.rule['threshold']:g} "
                f"x{self.rule.get('consecutive', 1)}, streak {int(result.get('promotion_streak', 0))})"
            )
        elif "team_return_sum_mean" in result:
            parts.append(f"team_return_sum_mean {fmt_value(result['team_return_sum_mean'])}")
        parts += [f"budget {self.budget}", elapsed_str(time.time() - self.started)]
        return " | ".join(parts)

    def report(self, trials: list, done: bool, *sys_info: str) -> None:
        line = self.line(trials)
        if line.split(" | ")[:-1] != self._last.split(" | ")[:-1]:  # print only what changed
            print(line, flush=True)
        self._last = line
