"""The curriculum's promotion rule counts iterations that report the metric, and only those."""

from __future__ import annotations

from types import SimpleNamespace

from orchestrl.tracking.names import STREAK
from orchestrl.tune.trainable import ExperimentTrainable


def test_iterations_without_the_held_out_metric_neither_count_nor_break_the_streak() -> None:
    stage = SimpleNamespace(
        promotion={"metric": "eval/env/success", "threshold": 0.9, "consecutive": 2}, streak=0
    )
    seen = []
    for metrics in ({"eval/env/success": 0.95}, {}, {}, {"eval/env/success": 0.97}):
        seen.append((ExperimentTrainable._promotion(stage, metrics), metrics[STREAK]))
    assert [streak for _, streak in seen] == [1, 1, 1, 2]
    assert [reason is not None for reason, _ in seen] == [False, False, False, True]
    assert ExperimentTrainable._promotion(stage, {"eval/env/success": 0.5}) is None and stage.streak == 0
