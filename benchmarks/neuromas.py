"""NeuroMAS evidence on Text2SQL (v3): held-out-schema and hand-written-question execution accuracy.

Every run goes through the same RLlib modules and learner as ``orchestrl train``, in process via
``InProcessTrainer`` (Ray is never started; one torch thread per run): behaviour cloning from the
env's expert on the ``train`` split's schemas, then PPO on the shared execution reward. Each
trained team is then scored by ``orchestrl ask``'s own path (:mod:`orchestrl.apps.text2sql.score`) on

- ``heldout_execution_accuracy``: every question of the ``test`` split, three schemas training
  never saw, half of it phrased by the held-out grammar training never saw (the JSON also splits it
  into ``heldout_unseen_grammar_accuracy`` and the seen half);
- ``natural_accuracy``: the 75 hand-written questions of ``tests/data/text2sql_natural.jsonl`` over
  the same test schemas, written by a person before the grammars and never used to train or tune.

Variants (every one with frozen all-MiniLM-L6-v2 WordPiece vectors and value linking):

- ``neuromas3/5/7``: hidden layers [1,1] / [2,2] / [2,2,2], continuous messages, ``observe:
  inputs`` (the composer does not read the question at all; it knows the task from its messages);
- ``neuromas3/5/7_cut``: the same with messages cut: the composer is blind;
- ``neuromas5_reads_all``: ``observe: all``, every agent reads the question (what messages should
  recover);
- ``monolithic``: one node reads everything and acts for both agents, its backbone widened to
  NeuroMAS-7's parameter count;
- ``neuromas7_grown``: NeuroMAS-7 grown from the same seed's trained ``neuromas5`` (exact: the new
  layer starts as relays), then the ``neuromas7`` recipe on fresh demonstrations (seed + 1000);
  ``neuromas7_long``: NeuroMAS-7 from scratch with the same total env steps as the grown one and its
  -5 together (twice the demonstrations and PPO iterations, the same number of gradient steps);
- ``neuromas5_contextual``: ``neuromas5_reads_all`` with the question's words as the frozen MiniLM's
  contextual states (cached per question) instead of static piece vectors, with the CPU it costs.

v3 (every node works; ``configs/neuromas_text2sql.yaml`` is ``neuromas5_every_ctx_esdev_group_rl``):

- ``neuromas5_every`` / ``neuromas7_every``: every node reads the question, hidden ones through
  queries conditioned on their messages (``observe: every``), each with a rank-8 adapter, and the
  composer decides after the extractor, knowing its choices (``sequential``);
- ``monolithic_every``: one node deciding the same way, widened to ``neuromas7_every``'s *live*
  parameters (those on some path to the actions); ``monolithic_compute``: the same width, its neuron
  applied five times (NeuroMAS-7's layers: the compute-matched control);
- ``neuromas5_every_es`` / ``monolithic_every_es``: cloned to early stopping on the validation
  split's schemas (twice the demonstrations, at most five times the epochs);
- ``neuromas5_every_rl`` / ``neuromas5_every_cf``: a measured RL phase (``RL_PHASE``) after the
  budget's cloning, on the shared reward / with per-agent counterfactual credit
  (``credit: counterfactual``); ``neuromas5_every_es_rl``: the same RL phase after early stopping;
  ``neuromas5_every_es_group_rl``: that RL phase with the group baseline (``baseline: group``: four
  sampled queries per question, each scored against the other three, as many env steps);
- ``_ctx``: question words as the frozen MiniLM's contextual states (``contextual``), so a paraphrase
  is read in its sentence: ``neuromas5_every_ctx`` against ``monolithic_every_ctx`` (widened to
  ``neuromas7_every_ctx``'s live parameters), ``neuromas5_every_ctx_es_rl``,
  ``neuromas5_every_ctx_es_group_rl``; ``_esdev``: early stopping on the mean agreement over the
  validation split and the 30 hand-written dev questions (``tests/data/text2sql_natural_dev.jsonl``,
  validation schemas; the 75 test questions are never used): ``neuromas5_every_ctx_esdev_rl``,
  ``neuromas5_every_ctx_esdev_group_rl`` (the shipped config), and its clone alone,
  ``neuromas5_every_ctx_esdev``, against ``monolithic_every_ctx_esdev`` (the live-matched contextual
  monolith cloned to the same early stopping) and ``monolithic_compute_ctx_esdev`` (the same, its
  neuron applied five times: compute-matched).

Teams are scored as ``orchestrl ask`` decodes, constrained (:class:`~orchestrl.apps.text2sql.ask.Team`);
``*_free`` is the same team with each action component's own argmax, so decoding's share shows.
Every run also reports ``live_params``, ``cpu_ms_per_question`` (writing the test split's queries)
and its accuracies right after cloning (``cloned_*``), so ``rl_gain_over_cloning`` is the PPO
iterations' own effect; ``network_vs_monolith`` and ``network_vs_compute_matched`` compare the v3
networks with the two monoliths on the hand-written questions.

``blind_baseline`` is what the cut variants should fall to: the expert's extractor with a composer
that ignores the question and always plays the most common expert composer action of the training
split (``per_component_mode``: each component's most common value, what greedy play of a composer
cloned blind approaches, each head learning its own marginal; the aggregate is nearly tied between
none and COUNT, so which of the two such a composer plays varies from run to run).
Each learned figure is the IQM over seeds with a 95% stratified-bootstrap CI
(:mod:`orchestrl.tracking.stats`); ``cpu_minutes`` is each run's process CPU time (training only).

Run:
    python benchmarks/neuromas.py --quick          # 1 seed, tiny budgets: the pipeline (v3 variants)
    python benchmarks/neuromas.py                  # 3 seeds, full budgets, the v3 variants (``V3``)
    python benchmarks/neuromas.py --long --variants neuromas5_reads_all --seeds 2 --jobs 2
                                                   # the language goal: 60 cloning epochs on 8,192 demos
    python benchmarks/neuromas.py --variants neuromas5 neuromas5_cut --seeds 2
    python benchmarks/neuromas.py --variants neuromas5_every_ctx_esdev_group_rl --rl-iterations 64 \\
        --rl-curve 16                              # a longer RL phase, scored every 16 iterations on
                                                   # training, validation and dev questions (``rl_curve``)
    python benchmarks/neuromas.py --score <checkpoint>   # every split and both hand-written sets
    python benchmarks/neuromas.py --summarise run.err    # the figures of the runs an interrupted run
                                                         # finished (its stderr), each over its seeds

Measured: ``benchmarks/RESULTS.md``, sections "NeuroMAS on Text2SQL" (v2, its log
``benchmarks/logs/neuromas_v2_full.log``) and "NeuroMAS v3 on Text2SQL" (``neuromas_v3_full.log``),
each from the full run's per-run lines through ``--summarise``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from orchestrl.algorithms.behaviour_cloning import configured_warm_start
from orchestrl.algorithms.neuromas.growth import grow
from orchestrl.algorithms.neuromas.network import parameter_count
from orchestrl.algorithms.neuromas.team_env import TEAM
from orchestrl.apps.text2sql.ask import Team
from orchestrl.apps.text2sql.score import execution_accuracy, successes
from orchestrl.envs.text2sql import actions as act
from orchestrl.envs.text2sql.bank import QuestionBank, load_bank
from orchestrl.envs.text2sql.expert import expert_actions
from orchestrl.envs.text2sql.handwritten import load_handwritten
from orchestrl.envs.text2sql.query import PlanError, render_sql
from orchestrl.envs.text2sql.questions import Question
from orchestrl.envs.text2sql.schemas import SCHEMAS
from orchestrl.envs.text2sql.scoring import results_match
from orchestrl.envs.text2sql.sql_runner import SQLRunner
from orchestrl.experiment.builder import build_ppo_config
from orchestrl.experiment.config import validate_config
from orchestrl.tracking.stats import aggregate, reaches
from orchestrl.training.inprocess import InProcessTrainer
from orchestrl.training.runtime import quiet_environment, silence_noise, worker_pool

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run_log

ROOT = Path(__file__).resolve().parents[1]
NATURAL = ROOT / "tests" / "data" / "text2sql_natural.jsonl"
NATURAL_DEV = ROOT / "tests" / "data" / "text2sql_natural_dev.jsonl"


@dataclass(frozen=True)
class Budget:
    seeds: int
    bc_epochs: int
    bc_samples: int
    """Expert demonstrations (env steps), drawn at random from the training questions."""
    rl_iterations: int
    rl_batch: int
    rl_phase_iterations: int | None = None
    """The measured RL phase's PPO iterations (``_rl``/``_cf`` variants); ``None``: ``RL_PHASE``'s
    share of the budget."""


QUICK = Budget(1, bc_epochs=2, bc_samples=512, rl_iterations=1, rl_batch=64)
FULL = Budget(3, bc_epochs=12, bc_samples=4096, rl_iterations=2, rl_batch=256)
LONG = Budget(2, bc_epochs=60, bc_samples=8192, rl_iterations=2, rl_batch=256)
"""The budget of the language goal's measurement (under 30 CPU-minutes per run)."""

MODEL = {
    "embed_dim": 48,
    "text_layers": 2,
    "heads": 4,
    "aux_coeff": 0.1,
    "bc_token_dropout": 0.1,
    "word_vectors": True,
    "observe": "inputs",
    "messages": "continuous",
}
"""Every variant's knobs unless it says otherwise."""
BC = {"batch_size": 64, "lr": 3e-3}
"""The ``warm_start:`` settings every variant clones the expert with."""
HIDDEN = [96]
RL_LR = 3e-5
"""PPO fine-tunes the cloned policy gently (at 3e-4 its first updates, with a critic that has not
learnt yet, undid much of what cloning gave on test questions)."""
EVERY_NODE = {"observe": "every", "sequential": True, "adapter_rank": 8}
"""v3: every node reads the question (hidden ones through queries conditioned on their messages),
each with its own low-rank adapter, and the composer decides after the extractor, knowing its
choices."""
EARLY_STOPPING = {
    "bc_validation_env": {"split": "validation"},
    "bc_validation_episodes": 512,
    "bc_patience": 4,
}
"""Cloning to early stopping on the validation split's schemas, on twice the demonstrations, for
at most five times the budget's epochs (:mod:`orchestrl.algorithms.neuromas.cloning`)."""
EARLY_STOPPING_DEV = {
    **EARLY_STOPPING,
    "bc_validation_env": [
        {"split": "validation"},
        {"split": "validation", "questions_file": str(NATURAL_DEV)},
    ],
}
"""The same, stopping on the mean agreement over the validation split and the 30 hand-written dev
questions (on the validation schemas; the test set's 75 are never used)."""
ES_RL = {"layers": [2, 2], **EVERY_NODE, **EARLY_STOPPING, "anchor_coeff": 0.05}
"""v3's shipped recipe: NeuroMAS-5, every node working, cloned to early stopping, then RL anchored to
the clone."""
GROUP_BASELINE = {"baseline": "group", "group_size": 4}
"""RL with the group baseline: four sampled queries per question, each scored against the other three."""
VARIANTS: dict[str, dict[str, Any]] = {
    "neuromas3": {"layers": [1, 1]},
    "neuromas5": {"layers": [2, 2]},
    "neuromas7": {"layers": [2, 2, 2]},
    "neuromas3_cut": {"layers": [1, 1], "messages": "none"},
    "neuromas5_cut": {"layers": [2, 2], "messages": "none"},
    "neuromas7_cut": {"layers": [2, 2, 2], "messages": "none"},
    "neuromas5_reads_all": {"layers": [2, 2], "observe": "all"},
    "monolithic": {"monolithic": True},
    "neuromas7_grown": {"layers": [2, 2, 2]},
    "neuromas7_long": {"layers": [2, 2, 2]},
    "neuromas5_contextual": {"layers": [2, 2], "observe": "all", "contextual": True},
    "neuromas5_every": {"layers": [2, 2], **EVERY_NODE},
    "neuromas7_every": {"layers": [2, 2, 2], **EVERY_NODE},
    "monolithic_every": {"monolithic": True, "sequential": True},
    "monolithic_compute": {"monolithic": True, "sequential": True, "repeats": 5},
    "neuromas5_every_es": {"layers": [2, 2], **EVERY_NODE, **EARLY_STOPPING},
    "monolithic_every_es": {"monolithic": True, "sequential": True, **EARLY_STOPPING},
    "neuromas5_every_rl": {"layers": [2, 2], **EVERY_NODE, "anchor_coeff": 0.05},
    "neuromas5_every_es_rl": ES_RL,
    "neuromas5_every_es_group_rl": {**ES_RL, **GROUP_BASELINE},
    "neuromas5_every_ctx_es_rl": {**ES_RL, "contextual": True},
    "neuromas5_every_ctx": {"layers": [2, 2], **EVERY_NODE, "contextual": True},
    "neuromas7_every_ctx": {"layers": [2, 2, 2], **EVERY_NODE, "contextual": True},
    "monolithic_every_ctx": {"monolithic": True, "sequential": True, "contextual": True},
    "neuromas5_every_ctx_esdev_rl": {**ES_RL, **EARLY_STOPPING_DEV, "contextual": True},
    "neuromas5_every_ctx_esdev_group_rl": {
        **ES_RL,
        **EARLY_STOPPING_DEV,
        "contextual": True,
        **GROUP_BASELINE,
    },
    "neuromas5_every_ctx_es_group_rl": {**ES_RL, "contextual": True, **GROUP_BASELINE},
    "neuromas5_every_ctx_esdev": {"layers": [2, 2], **EVERY_NODE, **EARLY_STOPPING_DEV, "contextual": True},
    "monolithic_every_ctx_esdev": {
        "monolithic": True,
        "sequential": True,
        "contextual": True,
        **EARLY_STOPPING_DEV,
    },
    "monolithic_compute_ctx_esdev": {
        "monolithic": True,
        "sequential": True,
        "contextual": True,
        "repeats": 5,
        **EARLY_STOPPING_DEV,
    },
    "neuromas5_every_cf": {
        "layers": [2, 2],
        **EVERY_NODE,
        "anchor_coeff": 0.05,
        "credit": "counterfactual",
        "alternatives": 4,
    },
}
SHIPPED = "neuromas5_every_ctx_esdev_group_rl"
"""The variant ``configs/neuromas_text2sql.yaml`` trains (the README's ``orchestrl ask`` example)."""
V3 = [
    "neuromas5",
    "neuromas5_every",
    "neuromas7_every",
    "monolithic_every",
    "monolithic_compute",
    "neuromas5_every_es",
    "monolithic_every_es",
    "neuromas5_every_rl",
    "neuromas5_every_cf",
    "neuromas5_every_es_rl",
]
"""What a run without ``--variants`` trains: v3 and, as the baseline of the same run, v2's NeuroMAS-5."""
RL_PHASE = {"rl_iterations": 16, "lr": 1e-4}
"""The variants whose RL phase is measured (``_rl``: the shared reward; ``_cf``: per-agent
counterfactual credit): 16 PPO iterations at 1e-4 with an anchor to the cloned policy, and, in the
same run from the same cloned weights, cloning continued for the RL phase's wall time (``bc_more_*``)."""
MATCHED = {
    "monolithic": ("neuromas7", "params"),
    "monolithic_every": ("neuromas7_every", "live_params"),
    "monolithic_every_ctx": ("neuromas7_every_ctx", "live_params"),
}
"""A monolith's backbone is widened to the parameter count of the network named (total or live)."""
SAME_WIDTH = {
    "monolithic_compute": "monolithic_every",
    "monolithic_every_es": "monolithic_every",
    "monolithic_every_ctx_esdev": "monolithic_every_ctx",
    "monolithic_compute_ctx_esdev": "monolithic_every_ctx",
}
"""Monoliths built at another one's width: the compute-matched one (the live-matched width, its neuron
applied once per layer of NeuroMAS-7: input, three hidden, output) and the early-stopped ones (the
live-matched width, cloned as their network is)."""
GROWN_SEED_OFFSET = 1000
"""The grown run's own seed (fresh demonstrations and PPO samples) is its -5's seed + this."""
CURVE_QUESTIONS = 400
"""The RL curve reads the first this many training and validation questions."""


def text2sql_experiment(
    knobs: dict[str, Any], seed: int, budget: Budget, data_dir: Path, hidden: list[int]
) -> dict[str, Any]:
    return {
        "name": "bench_neuromas",
        "seed": seed,
        "run_dir": str(data_dir.parent / "runs"),
        "env": {"name": "text2sql", "kwargs": {"split": "train", "data_dir": str(data_dir)}},
        "algorithm": {
            "name": "neuromas",
            **MODEL,
            **knobs,
        },
        "warm_start": {
            "episodes": budget.bc_samples,  # one question per episode
            "epochs": budget.bc_epochs,
            "batch_size": BC["batch_size"],
            "lr": BC["lr"],
        },
        "model": {"hidden": hidden},
        "training": {
            "lr": RL_LR,
            "entropy_coeff": 0.0,
            "num_epochs": 2,
            "minibatch_size": min(128, budget.rl_batch),
            "train_batch_size": budget.rl_batch,
        },
        "resources": {"env_runners": 0, "envs_per_env_runner": 16},
    }


@dataclass(frozen=True)
class Evaluation:
    """The question sets a team is scored on (built once per process)."""

    bank: QuestionBank
    test: tuple[Question, ...]
    natural: tuple[Question, ...]
    along_rl: dict[str, tuple[Question, ...]]
    """What the RL curve reads (``--rl-curve``): the training questions RL samples, the validation
    split and the hand-written dev set; never the test split or the 75 test questions."""

    @classmethod
    def load(cls, data_dir: Path) -> Evaluation:
        bank = load_bank(0, data_dir)
        along_rl = {
            "train": bank.questions("train")[:CURVE_QUESTIONS],
            "validation": bank.questions("validation")[:CURVE_QUESTIONS],
            "dev": tuple(load_handwritten(NATURAL_DEV, bank)),
        }
        return cls(bank, bank.questions("test"), tuple(load_handwritten(NATURAL, bank)), along_rl)

    def curve_point(self, module: Any) -> dict[str, float]:
        """Execution accuracy on the RL curve's sets, as ``orchestrl ask`` decodes."""
        team = Team(module, constrained=True)
        return {
            key: round(execution_accuracy(team, questions, self.bank.db_paths, self.bank.values), 4)
            for key, questions in self.along_rl.items()
        }

    def batch(self, n: int = 64) -> dict[str, Any]:
        """The team's observations of the first ``n`` test questions (a forward pass's input)."""
        from ray.rllib.core.columns import Columns

        from orchestrl.apps.text2sql.ask import observation_batch

        questions = self.test[:n]
        return {
            Columns.OBS: observation_batch(
                [q.words for q in questions],
                [SCHEMAS[q.schema] for q in questions],
                [self.bank.values[q.schema] for q in questions],
            )
        }

    def cpu_ms_per_question(self, module: Any) -> float:
        """Process CPU time of writing the test split's queries (the team's forward passes and
        decoding, not the SQL), per question."""
        from orchestrl.envs.text2sql.word_vectors import CONTEXT_CACHE

        team, questions = Team(module), self.test
        CONTEXT_CACHE.clear()  # a contextual team reads a question it has not seen through MiniLM
        started = time.process_time()
        team.plans(
            [q.words for q in questions],
            [SCHEMAS[q.schema] for q in questions],
            [self.bank.values[q.schema] for q in questions],
        )
        return 1000 * (time.process_time() - started) / len(questions)

    def score(self, module: Any) -> dict[str, float]:
        """Execution accuracies as ``orchestrl ask`` decodes (constrained), and ``*_free``: each
        action component's own argmax (what decoding adds)."""
        out: dict[str, float] = {}
        for suffix, constrained in (("", True), ("_free", False)):
            team = Team(module, constrained=constrained)
            test = successes(team, self.test, self.bank.db_paths, self.bank.values)
            natural = successes(team, self.natural, self.bank.db_paths, self.bank.values)
            unseen = [hit for hit, q in zip(test, self.test, strict=True) if q.unseen_phrasing]
            out[f"heldout{suffix}"] = float(np.mean(test))
            out[f"heldout_unseen_grammar{suffix}"] = float(np.mean(unseen))
            out[f"natural{suffix}"] = float(np.mean(natural))
        return out


_EVALUATION: dict[str, Evaluation] = {}


def evaluation(data_dir: Path) -> Evaluation:
    key = str(data_dir)
    if key not in _EVALUATION:
        _EVALUATION[key] = Evaluation.load(data_dir)
    return _EVALUATION[key]


def train_text2sql(
    name: str,
    seed: int,
    budget: Budget,
    data_dir: Path,
    hidden: list[int],
    grow_from: Any = None,
    curve_every: int = 0,
) -> tuple[dict[str, Any], Any]:
    """One run: (growth), behaviour cloning, PPO; scored by the env runner's module. With
    ``curve_every`` an RL phase is also scored every that many iterations (``rl_curve``, its
    scoring outside the run's CPU time)."""
    cpu, wall = time.process_time(), time.perf_counter()
    if name == "neuromas7_long":  # the env steps of a -5 run and a grown run together
        budget = replace(budget, bc_samples=2 * budget.bc_samples, rl_iterations=2 * budget.rl_iterations)
    if "bc_validation_env" in VARIANTS[name]:  # the epochs are a ceiling: it stops early
        budget = replace(budget, bc_samples=2 * budget.bc_samples, bc_epochs=5 * budget.bc_epochs)
    rl_phase = name.endswith(("_rl", "_cf"))
    if rl_phase:
        iterations = budget.rl_phase_iterations or budget.rl_iterations * RL_PHASE["rl_iterations"] // 2
        budget = replace(budget, rl_iterations=iterations)
    data = text2sql_experiment(VARIANTS[name], seed, budget, data_dir, hidden)
    if rl_phase:
        data["training"]["lr"] = RL_PHASE["lr"]
    warm_start = configured_warm_start(build_ppo_config(validate_config(data)))  # run after growth
    trainer = InProcessTrainer(build_ppo_config(validate_config({**data, "warm_start": {}})))
    try:
        module = trainer.learner.module[TEAM]
        report: dict[str, Any] = {}
        if grow_from is not None:
            grow(module, grow_from, seed=seed)
            trainer.sync_weights()
            report["at_growth"] = evaluation(data_dir).score(trainer.runner.module[TEAM])["heldout"]
        warm = warm_start(trainer.learner)
        trainer.sync_weights()
        scoring = time.process_time()
        cloned = evaluation(data_dir).score(trainer.runner.module[TEAM])
        cloned_state = module.get_state() if rl_phase else None
        curve = []
        if rl_phase and curve_every:
            curve.append({"iteration": 0, **evaluation(data_dir).curve_point(trainer.runner.module[TEAM])})
        cpu += time.process_time() - scoring  # scoring the clone is not training
        rl_started = time.perf_counter()
        for iteration in range(1, budget.rl_iterations + 1):
            trainer.step()
            if curve and iteration % curve_every == 0:
                scoring, paused = time.process_time(), time.perf_counter()
                point = evaluation(data_dir).curve_point(trainer.runner.module[TEAM])
                curve.append({"iteration": iteration, **point})
                cpu += time.process_time() - scoring
                rl_started += time.perf_counter() - paused
        rl_seconds = time.perf_counter() - rl_started
        cpu_minutes = (time.process_time() - cpu) / 60
        ev = evaluation(data_dir)
        final = ev.score(trainer.runner.module[TEAM])
        live = module.live_parameters(ev.batch())
        cpu_ms = ev.cpu_ms_per_question(trainer.runner.module[TEAM])
        if cloned_state is not None:  # the control replaces the weights: everything else first
            report["rl_seconds"] = rl_seconds
            report["rl_iterations"] = budget.rl_iterations
            if curve:
                report["rl_curve"] = curve
            report.update(cloning_continued(trainer, cloned_state, data, seed, rl_seconds, ev))
        result = {
            **final,
            **{f"cloned_{key}": value for key, value in cloned.items()},
            "bc_epochs": len(warm["bc_loss"]),
            "bc_loss_last": warm["bc_loss"][-1],
            "params": parameter_count(module),
            "live_params": live,
            "cpu_ms_per_question": cpu_ms,
            "cpu_minutes": cpu_minutes,
            "wall_minutes": (time.perf_counter() - wall) / 60,
            "env_steps": budget.bc_samples + budget.rl_iterations * budget.rl_batch,
            **report,
        }
        return result, module
    finally:
        trainer.stop()


def cloning_continued(
    trainer: InProcessTrainer,
    cloned: dict[str, Any],
    data: dict[str, Any],
    seed: int,
    seconds: float,
    ev: Any,
) -> dict[str, float]:
    """The RL phase's control: the same cloned weights, cloned further on the run's demonstrations
    (collected again with the warm start's seed, outside the timed window) for the RL phase's wall
    time; scored as the RL phase was (``bc_more_*``). Leaves the trainer's module so."""
    from orchestrl.algorithms.behaviour_cloning import collect_demonstrations
    from orchestrl.algorithms.context import WarmStartSection
    from orchestrl.algorithms.neuromas.cloning import behaviour_cloning
    from orchestrl.algorithms.neuromas.team_env import NeuromasTeamEnv, ungrouped

    module = trainer.learner.module[TEAM]
    module.set_state(cloned)
    env = NeuromasTeamEnv(ungrouped(trainer.config.env_config))
    try:
        episodes = data["warm_start"]["episodes"]
        demos = collect_demonstrations(env, env.team_expert, episodes, seed=seed, gamma=trainer.config.gamma)
    finally:
        env.close()
    warm = data["warm_start"]
    settings = WarmStartSection(
        episodes=episodes, epochs=10_000, batch_size=warm["batch_size"], lr=warm["lr"]
    )
    behaviour_cloning(
        module,
        demos[TEAM],
        settings,
        env_components=len(module.env_lens),
        token_dropout=data["algorithm"]["bc_token_dropout"],
        seed=seed + 1,
        max_seconds=seconds,
    )
    trainer.sync_weights()
    return {f"bc_more_{k}": v for k, v in ev.score(trainer.runner.module[TEAM]).items()}


def run_text2sql(
    name: str,
    seed: int,
    budget: Budget,
    data_dir: Path,
    hidden: list[int],
    modules: Path,
    curve_every: int = 0,
) -> dict[str, Any]:
    """One run in a worker process. ``neuromas5`` leaves its module in ``modules/<seed>`` for the
    same seed's ``neuromas7_grown``, which trains under seed + GROWN_SEED_OFFSET."""
    from orchestrl.algorithms.neuromas.growth import load_module

    grow_from = None
    if name == "neuromas7_grown":
        grow_from = load_module(modules / str(seed))
        seed += GROWN_SEED_OFFSET
    result, module = train_text2sql(name, seed, budget, data_dir, hidden, grow_from, curve_every)
    if name == "neuromas5":
        module.save_to_path(str(modules / str(seed)))
    return result


def module_parameters(name: str, data_dir: Path, hidden: list[int], kind: str = "params") -> int:
    """A freshly built variant's parameters: all of them (``params``) or the ``live_params`` its
    actions depend on (:meth:`~orchestrl.algorithms.neuromas.module.NeuromasModule.live_parameters`)."""
    cfg = validate_config(text2sql_experiment(VARIANTS[name], 0, QUICK, data_dir, hidden))
    module = build_ppo_config(cfg).get_multi_rl_module_spec().build()[TEAM]
    if kind == "live_params":
        return module.live_parameters(evaluation(data_dir).batch())
    return parameter_count(module)


def matched_hidden(name: str, data_dir: Path) -> list[int]:
    """The backbone width that gives monolith ``name`` the parameter count (``MATCHED``) of the
    network it is compared with: the width whose count is nearest, by bisection (counts grow with
    the width)."""
    network, kind = MATCHED[name]
    target = module_parameters(network, data_dir, HIDDEN, kind)
    low, high = HIDDEN[0], 16 * HIDDEN[0]
    while high - low > 1:
        mid = (low + high) // 2
        if module_parameters(name, data_dir, [mid], kind) < target:
            low = mid
        else:
            high = mid
    return [min((low, high), key=lambda w: abs(module_parameters(name, data_dir, [w], kind) - target))]


def blind_composer_scores(ev: Evaluation, composer: np.ndarray) -> dict[str, float]:
    """Execution accuracy of the expert's extractor with ``composer``, one fixed composer action."""
    bank = ev.bank
    scores = {}
    for key, questions in (("heldout", ev.test), ("natural", ev.natural)):
        hits = []
        for q in questions:
            schema = SCHEMAS[q.schema]
            extractor = expert_actions(q)[act.EXTRACTOR]
            plan = act.decode(extractor, composer, q.words, schema, bank.values[q.schema])
            try:
                sql = render_sql(plan, schema)
            except PlanError:
                hits.append(False)
                continue
            with SQLRunner(bank.db_paths[q.schema]) as runner:
                result = runner.run(sql)
            hits.append(result.ok and results_match(result.rows, q.gold_rows, q.ordered))
        scores[key] = round(float(np.mean(hits)), 4)
    return scores


def blind_baseline(ev: Evaluation) -> dict[str, Any]:
    """The expert's extractor and a composer that cannot see the question: what the cut variants
    can reach. The headline plays the most common whole expert composer action of the training
    split; ``per_component_mode`` plays each component's most common value, what greedy play of a
    composer cloned blind approaches (each of its heads learns one marginal). The two differ: on
    the training split the aggregate is nearly tied between none and COUNT."""
    train = np.array([expert_actions(q)[act.COMPOSER] for q in ev.bank.questions("train")])
    joint = np.array(Counter(map(tuple, train.tolist())).most_common(1)[0][0])
    marginal = np.array([Counter(column.tolist()).most_common(1)[0][0] for column in train.T])

    def entry(composer: np.ndarray) -> dict[str, Any]:
        scores = blind_composer_scores(ev, composer)
        return {
            "heldout_execution_accuracy": scores["heldout"],
            "natural_accuracy": scores["natural"],
            "composer_action": dict(zip(act.COMPOSER_COMPONENTS, composer.tolist(), strict=True)),
        }

    return {**entry(joint), "per_component_mode": entry(marginal)}


def run_all(
    variants: list[str], seeds: list[int], budget: Budget, root: Path, jobs: int, curve_every: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """Every (variant, seed) run, ``jobs`` at a time in worker processes (one torch thread each)."""
    data_dir, modules = root / "text2sql", root / "modules"
    load_bank(0, data_dir)  # the databases are written once, before the workers read them
    hidden = {name: HIDDEN for name in VARIANTS}
    for name in MATCHED:
        if name in variants or any(SAME_WIDTH.get(v) == name for v in variants):
            hidden[name] = matched_hidden(name, data_dir)
    for name, like in SAME_WIDTH.items():
        hidden[name] = hidden[like]
    order = sorted(variants, key=list(VARIANTS).index)
    waiting = [(name, seed) for seed in seeds for name in order if name != "neuromas7_grown"]
    grown_after = {("neuromas5", s): ("neuromas7_grown", s) for s in seeds if "neuromas7_grown" in order}
    runs: dict[str, dict[int, dict[str, float]]] = {name: {} for name in order}
    where = run_log.environment()  # the code and libraries the runs load, as they start
    with worker_pool(jobs, root) as pool:
        # At most ``jobs`` runs in flight, seed by seed, each grown run right after its -5 (not
        # behind every other seed's runs), so a run cut short still holds whole seeds.
        pending: dict[Any, tuple[str, int]] = {}
        while waiting or pending:
            while waiting and len(pending) < jobs:
                name, seed = waiting.pop(0)
                args = (name, seed, budget, data_dir, hidden[name], modules, curve_every)
                pending[pool.submit(run_text2sql, *args)] = (name, seed)
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                name, seed = pending.pop(future)
                runs[name][seed] = result = {**future.result(), "environment": where}
                line = json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()})
                print(f"seed {seed} {name:22s} {line}", file=sys.stderr, flush=True)
                if (name, seed) in grown_after:
                    waiting.insert(0, grown_after[(name, seed)])
    return {name: [by_seed[s] for s in seeds] for name, by_seed in runs.items()}


def summary(per_seed: list[float]) -> dict[str, Any]:
    agg = aggregate(np.asarray(per_seed)[:, None], seed=0)
    return {
        "iqm": round(agg.iqm.value, 4),
        "ci95": [round(agg.iqm.low, 4), round(agg.iqm.high, 4)],
        "per_seed": [round(v, 4) for v in per_seed],
    }


def cpu_summary(minutes: list[float]) -> dict[str, float]:
    return {"mean": round(float(np.mean(minutes)), 2), "max": round(float(np.max(minutes)), 2)}


def goals(result: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals, read off the figures (None where a variant was not run)."""
    held, nat = result["heldout_execution_accuracy"], result["natural_accuracy"]
    cpu = result["cpu_minutes"]

    def iqm(table: dict[str, Any], name: str) -> float | None:
        return table[name]["iqm"] if name in table else None

    out: dict[str, Any] = {}
    within = [n for n in held if cpu[n]["max"] <= 30]
    if within:
        best = max(within, key=lambda n: (nat[n]["iqm"], held[n]["iqm"]))
        out["language"] = {
            "best_variant_within_30_cpu_minutes": best,
            "natural_accuracy": nat[best]["iqm"],
            "heldout_execution_accuracy": held[best]["iqm"],
            "met": reaches(nat[best]["iqm"], 0.8) and reaches(held[best]["iqm"], 0.9),
        }
    measured = result.get("rl_vs_cloning_continued", {})  # the runs with a measured RL phase
    if measured:
        gains = {n: g["natural"] for n, g in result["rl_gain_over_cloning"].items() if n in measured}
        best = max(gains, key=lambda n: gains[n]["iqm"])
        out["rl_gain"] = {
            "best_variant": best,
            "natural_gain": gains[best]["iqm"],
            "ci95": gains[best]["ci95"],
            "met": reaches(gains[best]["iqm"], 0.05) and gains[best]["ci95"][0] > 0,
        }
    if "network_vs_monolith" in result:
        out["network_vs_live_matched_monolith"] = {
            "met": any(v["cis_apart"] for v in result["network_vs_monolith"].values())
        }
    mono = iqm(nat, "monolithic")
    if mono is not None:
        teams = {n: iqm(nat, n) for n in ("neuromas5", "neuromas7") if n in nat}
        out["network_vs_monolithic"] = {
            "natural_accuracy": {**teams, "monolithic": mono},
            "met": any(v >= mono for v in teams.values()),
        }
    if "neuromas5" in held and "neuromas5_reads_all" in held:
        ratio = {
            key: round(table["neuromas5"]["iqm"] / max(table["neuromas5_reads_all"]["iqm"], 1e-9), 4)
            for key, table in (("heldout", held), ("natural", nat))
        }
        out["communication"] = {
            "messages_over_reads_all": ratio,
            "met": reaches(min(ratio.values()), 0.95),
            "cut": {n: held[n]["iqm"] for n in held if n.endswith("_cut")},
            "blind_baseline": result["blind_baseline"]["heldout_execution_accuracy"],
            "blind_baseline_per_component_mode": result["blind_baseline"]["per_component_mode"][
                "heldout_execution_accuracy"
            ],
        }
    if "neuromas7_grown" in held and "neuromas7_long" in held:
        out["growth"] = {
            "grown_minus_scratch_equal_env_steps": {
                "heldout": round(held["neuromas7_grown"]["iqm"] - held["neuromas7_long"]["iqm"], 4),
                "natural": round(nat["neuromas7_grown"]["iqm"] - nat["neuromas7_long"]["iqm"], 4),
            },
        }
        out["growth"]["met"] = min(out["growth"]["grown_minus_scratch_equal_env_steps"].values()) >= 0
    return out


def score_checkpoint(path: str) -> dict[str, Any]:
    """Execution accuracy of a trained team (e.g. an ``orchestrl train`` checkpoint) on every
    question of each split and on both hand-written sets."""
    torch.set_num_threads(1)
    team = Team.load(path)
    with tempfile.TemporaryDirectory(prefix="neuromas_score_") as tmp:
        bank = load_bank(0, Path(tmp) / "text2sql")
        sets = {split: bank.questions(split) for split in ("train", "validation", "test")}
        sets["natural"] = tuple(load_handwritten(NATURAL, bank))
        sets["natural_dev"] = tuple(load_handwritten(NATURAL_DEV, bank))
        result = {
            name: round(execution_accuracy(team, qs, bank.db_paths, bank.values), 4)
            for name, qs in sets.items()
        }
    result = {"checkpoint": str(path), "execution_accuracy": result}
    print(json.dumps(result, indent=2))
    return result


def read_log(path: Path) -> dict[str, dict[int, dict[str, float]]]:
    """The per-run lines (``seed N VARIANT {json}``) a run printed on stderr: variant -> seed -> result."""
    runs: dict[str, dict[int, dict[str, float]]] = {}
    for line in path.read_text().splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[0] == "seed" and parts[2] in VARIANTS:
            runs.setdefault(parts[2], {})[int(parts[1])] = json.loads(parts[3])
    return {name: runs[name] for name in VARIANTS if name in runs}


def tabulate(runs: dict[str, dict[int, dict[str, float]]], baseline: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's figures from each variant's runs (seed -> result): IQM and CIs over the seeds
    each variant has, the blind baseline, the goals and the installs the runs recorded."""
    per = {name: [by_seed[s] for s in sorted(by_seed)] for name, by_seed in runs.items()}

    def table(key: str) -> dict[str, Any]:
        return {n: summary([r[key] for r in rs]) for n, rs in per.items()}

    result: dict[str, Any] = {
        "seeds": {n: sorted(by_seed) for n, by_seed in runs.items()},
        "heldout_execution_accuracy": table("heldout"),
        "natural_accuracy": table("natural"),
        "heldout_unseen_grammar_accuracy": table("heldout_unseen_grammar"),
        "blind_baseline": baseline,
        "params": {n: int(rs[0]["params"]) for n, rs in per.items()},
        "live_params": {n: int(rs[0]["live_params"]) for n, rs in per.items() if "live_params" in rs[0]},
        "cpu_ms_per_question": {
            n: round(float(np.mean([r["cpu_ms_per_question"] for r in rs])), 2)
            for n, rs in per.items()
            if "cpu_ms_per_question" in rs[0]
        },
        "env_steps": {n: int(rs[0]["env_steps"]) for n, rs in per.items()},
        "cpu_minutes": {n: cpu_summary([r["cpu_minutes"] for r in rs]) for n, rs in per.items()},
        "environments": run_log.environments(r for rs in per.values() for r in rs),
    }
    if "neuromas7_grown" in per:
        result["grown_at_growth_heldout_per_seed"] = [
            round(r["at_growth"], 4) for r in per["neuromas7_grown"]
        ]
    measured = {n: rs for n, rs in per.items() if "cloned_natural" in rs[0]}  # runs since v3
    if measured:
        result["rl_gain_over_cloning"] = {
            n: {key: summary([r[key] - r[f"cloned_{key}"] for r in rs]) for key in ("heldout", "natural")}
            for n, rs in measured.items()
        }
        result["bc_epochs"] = {n: [int(r["bc_epochs"]) for r in rs] for n, rs in measured.items()}
    free = {n: rs for n, rs in per.items() if "natural_free" in rs[0]}  # runs since constrained decoding
    if free:
        result["free_decoding"] = {
            n: {key: summary([r[f"{key}_free"] for r in rs]) for key in ("heldout", "natural")}
            for n, rs in free.items()
        }
    controlled = {n: rs for n, rs in per.items() if "bc_more_natural" in rs[0]}
    if controlled:
        result["rl_vs_cloning_continued"] = {
            n: {key: summary([r[key] - r[f"bc_more_{key}"] for r in rs]) for key in ("heldout", "natural")}
            for n, rs in controlled.items()
        }
        result["rl_seconds"] = {
            n: round(float(np.mean([r["rl_seconds"] for r in rs])), 1) for n, rs in controlled.items()
        }
        result["rl_iterations"] = {
            n: int(rs[0]["rl_iterations"]) for n, rs in controlled.items() if "rl_iterations" in rs[0]
        }
    curves = {n: rs for n, rs in per.items() if "rl_curve" in rs[0]}
    if curves:
        result["rl_curve"] = {n: rl_curve(n, [r["rl_curve"] for r in rs]) for n, rs in curves.items()}
    if {"neuromas5_every_cf", "neuromas5_every_rl"} <= set(per):
        result["counterfactual_vs_shared_reward"] = {
            key: {
                "counterfactual": summary([r[key] for r in per["neuromas5_every_cf"]]),
                "shared": summary([r[key] for r in per["neuromas5_every_rl"]]),
            }
            for key in ("heldout", "natural")
        }
    result.update(versus(result))
    result["goals"] = goals(result)
    return result


def rl_curve(name: str, per_seed: list[list[dict[str, float]]]) -> list[dict[str, Any]]:
    """Each scored point of ``name``'s RL phase (``--rl-curve``): per set, the IQM over seeds [95% CI]."""
    scored_at = {tuple(p["iteration"] for p in curve) for curve in per_seed}
    if len(scored_at) > 1:
        raise SystemExit(
            f"{name}: its runs scored their RL phases at different iterations {sorted(scored_at)}"
        )
    points = []
    for along in zip(*per_seed, strict=True):
        point: dict[str, Any] = {"iteration": along[0]["iteration"]}
        for key in along[0]:
            if key != "iteration":
                agg = summary([p[key] for p in along])
                point[key] = {"iqm": agg["iqm"], "ci95": agg["ci95"]}
        points.append(point)
    return points


def versus(result: dict[str, Any]) -> dict[str, Any]:
    """v3's comparisons: each every-node network against the monolith matched on live parameters and
    against the compute-matched one, on the hand-written questions (``natural_iqm_difference``,
    ``cis_apart``: the 95% CIs apart, the network's above; what the goal reads) and on the held-out
    schemas (``heldout_*``)."""
    nat, held = result["natural_accuracy"], result["heldout_execution_accuracy"]
    out: dict[str, Any] = {}
    for key, monolith, networks in (
        ("network_vs_monolith", "monolithic_every", ("neuromas5_every", "neuromas7_every")),
        ("network_vs_monolith", "monolithic_every_ctx", ("neuromas5_every_ctx",)),
        ("network_vs_monolith", "monolithic_every_ctx_esdev", ("neuromas5_every_ctx_esdev",)),
        ("network_vs_compute_matched", "monolithic_compute", ("neuromas5_every", "neuromas7_every")),
        ("network_vs_compute_matched", "monolithic_compute_ctx_esdev", ("neuromas5_every_ctx_esdev",)),
    ):
        present = [n for n in networks if n in nat]
        if monolith not in nat or not present:
            continue
        out.setdefault(key, {}).update(
            {
                name: {
                    "natural_iqm_difference": round(nat[name]["iqm"] - nat[monolith]["iqm"], 4),
                    "cis_apart": nat[name]["ci95"][0] > nat[monolith]["ci95"][1],
                    "heldout_iqm_difference": round(held[name]["iqm"] - held[monolith]["iqm"], 4),
                    "heldout_cis_apart": held[name]["ci95"][0] > held[monolith]["ci95"][1],
                }
                for name in present
            }
        )
    return out


def summarise_log(path: Path, budget: Budget, mode: str) -> dict[str, Any]:
    """The figures of the runs an interrupted benchmark finished (its stderr log), each variant over
    the seeds it completed; the blind baseline is computed afresh (it trains nothing)."""
    runs = read_log(path)
    if not runs:
        raise SystemExit(f"{path}: no per-run lines ('seed N VARIANT {{...}}') in it")
    with tempfile.TemporaryDirectory(prefix="neuromas_bench_") as tmp:
        ev = evaluation(Path(tmp) / "text2sql")
        baseline = blind_baseline(ev)
        counts = {"heldout": len(ev.test), "natural": len(ev.natural)}
    result = {
        "benchmark": "neuromas_text2sql_v3",
        "mode": mode,
        "budget": asdict(budget),
        "partial": {"log": str(path), "variants_missing": [n for n in V3 if n not in runs]},
        **tabulate(runs, baseline),
        "questions": counts,
    }
    print(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 seed, tiny budgets (under 4 minutes)")
    parser.add_argument("--long", action="store_true", help="the language goal's budget (LONG)")
    parser.add_argument("--variants", nargs="*", default=V3, choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=None, help="override the number of seeds")
    parser.add_argument(
        "--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1"
    )
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once (one process each)")
    parser.add_argument(
        "--rl-iterations",
        type=int,
        default=None,
        help="the measured RL phase's PPO iterations (default: RL_PHASE's share of the budget)",
    )
    parser.add_argument(
        "--rl-curve",
        type=int,
        default=0,
        metavar="K",
        help="score every RL phase on training, validation and dev questions every K iterations",
    )
    parser.add_argument("--score", metavar="CHECKPOINT", help="only score a trained text2sql checkpoint")
    parser.add_argument(
        "--summarise", metavar="LOG", help="the figures of the runs an interrupted run's stderr LOG holds"
    )
    args = parser.parse_args(argv)
    if args.score:
        return score_checkpoint(args.score)
    mode = "quick" if args.quick else "long" if args.long else "full"
    budget = QUICK if args.quick else LONG if args.long else FULL
    if args.rl_iterations is not None:
        if args.rl_iterations < 1:
            parser.error(f"--rl-iterations must be at least 1, got {args.rl_iterations}")
        budget = replace(budget, rl_phase_iterations=args.rl_iterations)
    if args.rl_curve < 0:
        parser.error(f"--rl-curve must be 0 (off) or a number of iterations, got {args.rl_curve}")
    if args.summarise:
        return summarise_log(Path(args.summarise), budget, mode)
    if "neuromas7_grown" in args.variants and "neuromas5" not in args.variants:
        parser.error("neuromas7_grown grows the same seed's neuromas5: run neuromas5 too")
    torch.set_num_threads(1)
    started, cpu_started = time.perf_counter(), time.process_time()
    with tempfile.TemporaryDirectory(prefix="neuromas_bench_") as tmp:
        root = Path(tmp)
        quiet_environment(root)
        silence_noise(verbose=False)
        seeds = list(range(args.first_seed, args.first_seed + (args.seeds or budget.seeds)))
        runs = run_all(args.variants, seeds, budget, root, max(1, args.jobs), args.rl_curve)
        ev = evaluation(root / "text2sql")
        baseline = blind_baseline(ev)
        counts = {"heldout": len(ev.test), "natural": len(ev.natural)}
    result: dict[str, Any] = {
        "benchmark": "neuromas_text2sql_v3",
        "mode": mode,
        "budget": asdict(budget),
        **tabulate({n: dict(zip(seeds, rs, strict=True)) for n, rs in runs.items()}, baseline),
        "questions": counts,
    }
    result["wall_minutes"] = round((time.perf_counter() - started) / 60, 1)
    result["driver_cpu_minutes"] = round((time.process_time() - cpu_started) / 60, 2)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
