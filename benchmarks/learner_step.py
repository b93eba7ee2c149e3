"""What RLlib's optimizer step costs a PPO update on CPU, and what the fast step saves.

RLlib 2.60's ``TorchLearner.apply_gradients`` runs ``torch.isfinite(g).all()`` on every gradient
twice per minibatch; :class:`~orchestrl.algorithms.ppo_learner.FastStepPPOLearner` checks all of
them with one fused norm and takes RLlib's path only when that norm is not finite. For each
algorithm, on the credit benchmark's settings (``benchmarks/credit.py``: level-4 orchestration,
8 agents, 256x256 networks, 250 env steps per iteration, 8 epochs of 250-row minibatches; no warm
start, 8 training tasks), one iteration's episodes are sampled, then two learners from the same
weights update on copies of them, in alternation, ``--repeats`` times: the algorithm's own
learner (``fast``) and the same learner with RLlib's ``apply_gradients`` put back (``rllib``).
Both see the same batches, so their weights must stay equal; the script checks it.

Printed: one JSON object, per algorithm: ``update_s`` (median seconds per ``learner.update``),
``apply_gradients_ms`` (mean per call: the checks and the Adam step), ``apply_gradients_calls``
(per learner, over its updates), ``speedup`` (RLlib's update time over the fast one's), ``weights_equal``;
``meta`` has the command and the load.

Run:
    .venv/bin/python benchmarks/learner_step.py                  # ippo, mappo, lemon; 3 repeats
    .venv/bin/python benchmarks/learner_step.py --algos mappo --repeats 5

Expected: the fast step's update no slower than RLlib's, the central critics (mappo, lemon),
whose first layer reads all 8 agents' observations, gaining most, and ``weights_equal`` true for
every algorithm. Figures: ``benchmarks/RESULTS.md``, section "Learner step".
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def timed(learner_class: type) -> type:
    """``learner_class`` with the wall time of its ``apply_gradients`` calls counted."""

    class Timed(learner_class):  # type: ignore[misc, valid-type]
        seconds = 0.0
        calls = 0

        def apply_gradients(self, gradients_dict: dict[Any, Any]) -> None:
            started = time.perf_counter()
            super().apply_gradients(gradients_dict)
            type(self).seconds += time.perf_counter() - started
            type(self).calls += 1

    return Timed


def measure(algo: str, repeats: int, seed: int) -> dict[str, Any]:
    import torch

    from orchestrl.algorithms.ppo_learner import with_rllibs_step
    from orchestrl.experiment.builder import build_ppo_config
    from orchestrl.experiment.config import validate_config
    from orchestrl.training.inprocess import InProcessTrainer

    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the credit benchmark's settings
    import credit

    bench = credit.benches(quick=False)["orchestration_l4"]
    bench = replace(bench, kwargs={**bench.kwargs, "task_pool": 8}, warm_start={})
    config = build_ppo_config(validate_config(credit.experiment(bench, algo, seed)))
    ours = timed(config.learner_class)
    rllibs = timed(with_rllibs_step(config.learner_class))
    trainers = {
        name: InProcessTrainer(copy.deepcopy(config).learners(learner_class=cls))
        for name, cls in (("fast", ours), ("rllib", rllibs))
    }
    try:
        trainers["rllib"].learner.module.set_state(trainers["fast"].learner.module.get_state())
        episodes = credit.sample(trainers["fast"].runner, bench.batch)
        seconds: dict[str, list[float]] = {name: [] for name in trainers}
        for _ in range(repeats):
            for name, t in trainers.items():
                batch = copy.deepcopy(episodes)  # the learner pipeline extends episodes in place
                started = time.perf_counter()
                t.learner.update(
                    episodes=batch,
                    num_epochs=config.num_epochs,
                    minibatch_size=config.minibatch_size,
                    shuffle_batch_per_epoch=False,
                )
                seconds[name].append(time.perf_counter() - started)
        weights = [list(t.learner._params.values()) for t in trainers.values()]
        equal = all(torch.equal(a, b) for a, b in zip(*weights, strict=True))
    finally:
        for t in trainers.values():
            t.stop()
    update = {name: statistics.median(s) for name, s in seconds.items()}
    return {
        "update_s": update,
        "apply_gradients_ms": {
            name: 1e3 * cls.seconds / max(1, cls.calls) for name, cls in (("fast", ours), ("rllib", rllibs))
        },
        "apply_gradients_calls": ours.calls,
        "speedup": update["rllib"] / update["fast"],
        "weights_equal": equal,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algos", nargs="+", default=["ippo", "mappo", "lemon"])
    parser.add_argument("--repeats", type=int, default=3, help="updates per learner (median reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench/learner_step"))
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: {args.repeats} (at least 1)")

    from orchestrl.experiment.algorithms import ALGORITHMS
    from orchestrl.training.runtime import quiet_environment, silence_noise

    unknown = [a for a in args.algos if a not in ALGORITHMS or a == "neuromas"]
    if unknown:
        parser.error(
            f"--algos: {', '.join(unknown)} (one of: {', '.join(sorted(set(ALGORITHMS) - {'neuromas'}))})"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    quiet_environment(args.out)
    silence_noise(False)
    import torch

    torch.set_num_threads(1)
    load_before, started = os.getloadavg(), time.perf_counter()
    results: dict[str, Any] = {algo: measure(algo, args.repeats, args.seed) for algo in args.algos}
    results["meta"] = {
        "command": " ".join(
            ["python", "benchmarks/learner_step.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "wall_s": time.perf_counter() - started,
        "load_avg_1_5_15_before": list(load_before),
        "load_avg_1_5_15_after": list(os.getloadavg()),
        "torch_threads": 1,
    }
    print(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
