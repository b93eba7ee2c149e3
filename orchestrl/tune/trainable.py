"""One experiment as a Ray Tune trial: the trainable behind ``orchestrl sweep`` and ``curriculum``.

A trial's config is ``{"experiment": <base experiment dict>, "<dotted key>": value, ...}``: the
sampled keys of a sweep stay visible at the top level (Tune's trial names, the progress table and
the searchers see them), and :func:`~orchestrl.tune.search_space.resolve_trial_config` turns the
whole into the :class:`ExperimentConfig` the trial runs. Two optional keys steer curricula:
``promotion`` (a metric at or above a threshold for k consecutive iterations ends the trial) and
``init_from`` (module weights carried from a previous stage's checkpoint).

Each step is one RLlib iteration whose result is curated by ``tracking.curate``, so Tune, its
schedulers and MLflow see the same handful of metric names that ``orchestrl train`` logs. The trial
stops on the experiment's own ``stop`` section (``train.stop_reason``). Checkpoints hold the whole
algorithm plus the trial's own counters, so a resumed or PBT-exploited trial continues where its
checkpoint left off.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ray import tune
from ray.tune.result import DONE

from orchestrl.algorithms.weight_sync import push_weights_to_env_runners
from orchestrl.experiment.config import ExperimentConfig
from orchestrl.tracking import names
from orchestrl.tracking.metrics import curate, evaluation_metrics
from orchestrl.tune.search_space import resolve_trial_config

STATE_FILE = "trial_state.json"
TOKEN_MEMORY = float(1 << 20)


def trial_resources(cfg: ExperimentConfig) -> Any:
    """The placement group a trial needs: RLlib's own request for the algorithm (main process with
    its local learner, one bundle per env runner, remote learners), so the env runners the trial
    starts are scheduled inside its reservation and cannot deadlock against other trials.

    Env runners with ``cpus_per_env_runner: 0`` get empty bundles from RLlib, which Ray refuses
    ("Bundles cannot be an empty dictionary"). They cannot be dropped, because RLlib places runner
    ``i`` in bundle ``i``. Each one holds a token 1 MiB of memory instead, so it stays free.
    """
    from ray.tune import PlacementGroupFactory

    from orchestrl.experiment.builder import base_ppo_config

    ppo = base_ppo_config(cfg)
    request = ppo.algo_class.default_resource_request(ppo)
    bundles = [b if any(v > 0 for v in b.values()) else {"memory": TOKEN_MEMORY} for b in request.bundles]
    return PlacementGroupFactory(bundles, strategy=request.strategy)


def trial_dirname(trial: Any) -> str:
    """A trial's folder: its id only. Tune's default spells out every sampled key, and Optuna hands
    it the whole experiment dict, which makes names past filesystem limits."""
    return f"trial_{trial.trial_id}"


def trial_cpus(cfg: ExperimentConfig) -> float:
    return float(trial_resources(cfg).required_resources.get("CPU", 0.0))


class ExperimentTrainable(tune.Trainable):
    """Builds the experiment's RLlib algorithm and trains it one iteration per Tune step."""

    def setup(self, config: dict[str, Any]) -> None:
        import ray

        from orchestrl.experiment.builder import build_ppo_config
        from orchestrl.training.checkpoints import build_algorithm
        from orchestrl.training.runtime import quiet_environment, silence_noise

        self.cfg = resolve_trial_config(config)
        quiet_environment(Path(self.cfg.run_dir))
        silence_noise(False)
        self.promotion: dict[str, Any] | None = config.get("promotion")
        gpus = ray.cluster_resources().get("GPU", 0.0)
        self.algo = build_algorithm(
            build_ppo_config(self.cfg, gpus_available=gpus), Path(self.logdir) / "rllib"
        )
        self.prev_env_steps = 0.0
        self.elapsed = 0.0
        self.streak = 0
        self.carry_report: str | None = None
        self.carry_gap: float | None = None
        init = config.get("init_from")
        if init:
            from orchestrl.training.weight_carry import carry_modules

            report = carry_modules(
                self.algo, init["checkpoint"], parts=init.get("parts", "auto"), module_map=init.get("modules")
            )
            self.carry_report, self.carry_gap = report.to_json(), report.runner_max_abs_diff

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> Any:
        return trial_resources(resolve_trial_config(config))

    def step(self) -> dict[str, Any]:
        started = time.time()
        iteration = self.iteration + 1
        metrics = curate(self.algo.train(), prev_env_steps=self.prev_env_steps)
        self.prev_env_steps = metrics["env_steps"]
        self.elapsed += time.time() - started
        reason = self._promotion(metrics)
        result: dict[str, Any] = dict(metrics)
        if self.carry_report is not None:  # the first result after a carry says what was carried
            result[names.CARRY], result[names.CARRY_GAP] = self.carry_report, self.carry_gap
            self.carry_report = None
        if reason:
            result[names.PROMOTED] = 1.0
        else:
            from orchestrl.training.train import stop_reason

            reason = stop_reason(self.cfg, iteration, metrics, self.elapsed)
        if reason:
            result.update(self._final_evaluation())
            result[names.STOP_REASON] = reason
        result[DONE] = bool(reason)
        return result

    def _promotion(self, metrics: dict[str, float]) -> str | None:
        """Counts consecutive iterations at or above the promotion threshold. An iteration that
        does not report the metric (a held-out metric between evaluations) neither counts nor
        breaks the streak."""
        rule = self.promotion
        if not rule or not rule.get("metric"):
            return None
        if rule["metric"] not in metrics:
            metrics[names.STREAK] = float(self.streak)
            return None
        value = metrics[rule["metric"]]
        self.streak = self.streak + 1 if value >= rule["threshold"] else 0
        metrics[names.STREAK] = float(self.streak)
        if self.streak >= int(rule.get("consecutive", 1)):
            return f"promoted: {rule['metric']} >= {rule['threshold']} for {self.streak} iterations"
        return None

    def _final_evaluation(self) -> dict[str, float]:
        """The experiment's end-of-run evaluation, as ``orchestrl train`` runs it."""
        if not (self.cfg.evaluation.episodes and not self.cfg.evaluation.interval):
            return {}
        return evaluation_metrics(curate({"evaluation": self.algo.evaluate()}))

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        from orchestrl.training.train import write_best_episode

        self.algo.save_to_path(str(Path(checkpoint_dir) / "algorithm"))
        write_best_episode(self.algo, Path(checkpoint_dir) / names.BEST_EPISODE_DIR)
        state = {"prev_env_steps": self.prev_env_steps, "elapsed": self.elapsed, "streak": self.streak}
        (Path(checkpoint_dir) / STATE_FILE).write_text(json.dumps(state))

    def load_checkpoint(self, checkpoint: str | dict | None) -> None:
        path = Path(str(checkpoint))
        self.algo.restore_from_path(str(path / "algorithm"))
        push_weights_to_env_runners(self.algo)  # restore's own sync is fire-and-forget
        state = json.loads((path / STATE_FILE).read_text())
        self.prev_env_steps = float(state["prev_env_steps"])
        self.elapsed = float(state["elapsed"])
        self.streak = int(state["streak"])
        self.carry_report = None  # a restored trial continues its own weights

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Lets Tune hand this actor to the next trial (``reuse_actors``): the algorithm is rebuilt
        for the new config, which saves starting a process that imports torch and RLlib again."""
        self.cleanup()
        self.setup(new_config)
        return True

    def cleanup(self) -> None:
        algo = getattr(self, "algo", None)
        if algo is not None:
            algo.stop()
