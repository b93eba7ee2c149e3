"""Every MLflow tag, run kind, metric name and run-folder file orchestrl writes, in one place.

A run is found again (to resume it, to report on it, to serve its checkpoint) by these names, so
whoever writes or reads them imports them from here.
"""

from __future__ import annotations

from orchestrl.envs.reporting import ENV_METRIC_PREFIX

# -- tags every run carries -----------------------------------------------------------------------
TAG_KIND = "orchestrl.kind"
"""What made the run: one of the ``KIND_*`` values below."""
TAG_PARENT = "mlflow.parentRunId"
"""MLflow's own tag nesting a child run under its parent (a sweep's trials, a curriculum's stages)."""
TAG_CHECKPOINT = "orchestrl.checkpoint"
"""The run's latest (for a parent: its best or final) algorithm checkpoint on disk."""
TAG_ITERATION = "orchestrl.iteration"
"""The last training iteration logged (a resumed run continues after it)."""
TAG_RUN_KEY = "orchestrl.run_key"
"""A run created through the tracking journal: its journal key, by which a replay finds it again
when the server's answer to its creation was lost."""
TAG_CONFIG = "orchestrl.config_path"
"""The resolved experiment YAML the run trained (``--resume`` rebuilds the run from it)."""
TAG_MODEL = "orchestrl.model_uri"
"""The run's final policy as an MLflow model (``models:/<model id>``; see ``tracking/models.py``)."""
TAG_EVALUATED = "orchestrl.evaluated_checkpoint"
"""An evaluation run's checkpoint (``orchestrl evaluate``)."""

# -- experiments ----------------------------------------------------------------------------------
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
"""MLflow 3's experiment type: its UI shows an experiment as GenAI (traces, sessions, judges) or as
model training (runs, params, metrics). Values in MLflow 3.17's UI: ``genai_development``,
``custom_model_development`` ("Machine learning"), and inferred or task-specific variants."""
EXPERIMENT_KIND_TRAINING = "custom_model_development"

# -- sweeps and curricula -------------------------------------------------------------------------
TAG_SPEC_NAME = "orchestrl.spec_name"
"""The sweep's or curriculum's ``name``: how ``--resume`` finds its latest parent run."""
TAG_TUNE_PATH = "orchestrl.tune_path"
"""The parent's Tune storage folder."""
TAG_BEST_TRIAL = "orchestrl.best_trial"
TAG_BEST_RUN = "orchestrl.best_run_id"
TAG_TRIAL = "orchestrl.trial_id"
"""A child run's Tune trial id (a resumed trial appends to the run with its id)."""
TAG_STOP = "orchestrl.stop_reason"
TAG_CARRY = "orchestrl.carry"
"""A stage's weight-carry report (JSON)."""
TAG_ERROR_FILE = "orchestrl.error_file"
TAG_STAGE = "orchestrl.stage"
TAG_STAGE_INDEX = "orchestrl.stage_index"
TAG_CURRICULUM_ITERATIONS = "orchestrl.curriculum_iterations"


def stage_tag(index: int, key: str) -> str:
    """A curriculum parent's record of stage ``index``: ``checkpoint``, ``run_id``, ``promoted_by``,
    ``iterations`` or ``value`` (what ``--resume`` needs to skip finished stages)."""
    return f"orchestrl.stage.{index}.{key}"


KIND_TRAIN = "train"
KIND_SWEEP = "sweep"
KIND_SWEEP_TRIAL = "sweep_trial"
KIND_CURRICULUM = "curriculum"
KIND_CURRICULUM_STAGE = "curriculum_stage"
KIND_REPORT = "report"
KIND_EVALUATE = "evaluate"

# -- curated metrics (see orchestrl.tracking.metrics.curate) -------------------------------------
TEAM_RETURN = "team_return_sum_mean"
"""The team return SUMMED over agents (RLlib's multi-agent episode return), mean over episodes."""
ENV_STEPS = "env_steps"
ENV_STEPS_PER_S = "env_steps_per_s"
EVAL_PREFIX = "eval/"
"""Held-out evaluation metrics: ``eval/<curated name>``."""
ENV_PREFIX = ENV_METRIC_PREFIX
"""What the env reports at an episode's end: ``env/<name>`` (``env/success``...)."""
CREDIT_PREFIX = "credit/"
"""Per-module credit statistics: ``<module>/credit/<agent>_<stat>``."""
MODULE_STATS = ("policy_loss", "vf_loss", "entropy", "vf_explained_var", "mean_kl_loss")
"""Learner statistics logged per module as ``<module>/<stat>``."""
CURRICULUM_PREFIX = "curriculum/"
"""A curriculum parent's stage transitions (``curriculum/stage``, ``curriculum/stage_iterations``...)."""

# -- keys a Tune trial adds to its result ----------------------------------------------------------
STOP_REASON = "stop_reason"
PROMOTED = "promoted"
STREAK = "promotion_streak"
CARRY = "carry"
CARRY_GAP = "carry/runner_max_abs_diff"

# -- files in a run's folder -----------------------------------------------------------------------
CONFIG_FILE = "config.yaml"
METRICS_CSV = "metrics.csv"
LEARNING_CURVE = "learning_curve.png"
CREDIT_TABLE = "credit_table.csv"
POLICY_DIR = "policy"
"""The run folder's policy folder (``orchestrl.experiment.policy``), logged as the MLflow model
``policy``."""
ARTIFACTS_DIR = "artifacts"
"""The run folder's env artifacts (LEMON's best spec, the credit table), logged under ``env/``."""
JOURNAL_DIR = "tracking_journal"
"""In a run dir: the journal of tracking writes a remote server has not taken yet (see
``orchestrl.tracking.journal``)."""
BEST_EPISODE_DIR = "best_episode"
"""Inside a trial checkpoint: the files of the best episode so far (e.g. LEMON's spec.yaml)."""
