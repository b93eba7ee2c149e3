"""Does the test suite catch a broken algorithm? Apply deliberate faults one at a time and see.

Each fault is an exact text edit of one source file (the script refuses to run a fault whose
original text is no longer there, so it cannot silently test nothing). For each fault the script
copies the repository's ``orchestrl/``, ``tests/``, ``tools/`` and ``pyproject.toml`` into a
temporary folder, applies the edit there (the working tree is never touched), runs the tests that
should notice, and records which of them failed. A fault no test catches is a hole in the suite.

Run:      python benchmarks/mutants.py            (every fault; or: make mutants)
          python benchmarks/mutants.py --faults advantage_sign weight_sync
Prints:   one JSON object: {fault: {"caught": bool, "caught_by": [test ids], "seconds": float}},
          plus "all_caught". Exit status 1 when a fault escapes.
Expect:   every fault caught (each fault reruns its test files, so the whole run takes minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COPIED = ("orchestrl", "tests", "tools", "pyproject.toml")


@dataclass(frozen=True)
class Fault:
    """One deliberate bug: replace ``old`` by ``new`` in ``path``; ``tests`` should notice."""

    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


FAULTS = (
    Fault(
        "advantage_sign",
        "the counterfactual advantage pieces (team GAE, COMA, LEMON) hand PPO -A instead of A",
        "orchestrl/algorithms/credit/advantage.py",
        "                advantages, dtype=torch.float32, device=device\n",
        "                -advantages, dtype=torch.float32, device=device\n",
        (
            "tests/algorithms/test_training_beats_untrained.py",
            "tests/algorithms/credit/test_credit_pipeline.py",
        ),
    ),
    Fault(
        "coma_baseline_removed",
        "COMA's advantage is Q(s,u) itself: the counterfactual baseline is not subtracted",
        "orchestrl/algorithms/coma/advantage.py",
        "    return q_taken - head.expected(q, probs, conditional), q_taken\n",
        "    return q_taken - 0.0 * head.expected(q, probs, conditional), q_taken\n",
        ("tests/algorithms/coma/test_coma_maths.py",),
    ),
    Fault(
        "delta_on_the_wrong_agent",
        "each agent's replay delta lands on the rows of another agent",
        "orchestrl/algorithms/joint_columns.py",
        "        record = (ma.custom_data.get(REPLAY_KEY) or {}).get(aid)\n",
        "        records = ma.custom_data.get(REPLAY_KEY) or {}\n"
        "        others = sorted(a for a in records if a != aid)\n"
        "        record = records.get(others[0]) if others else None\n",
        ("tests/algorithms/credit/test_credit_pipeline.py",),
    ),
    Fault(
        "weight_sync_skipped",
        "the learner's weights never reach the env runner that samples (in-process trainer)",
        "orchestrl/training/inprocess.py",
        '        self.runner.set_state({"rl_module": self.learner.module.get_state(inference_only=True)})\n',
        "        return\n",
        ("tests/algorithms/test_training_beats_untrained.py", "tests/algorithms/test_warm_start.py"),
    ),
    Fault(
        "neuromas_advantage_sign",
        "NeuroMAS' joint loss (PPO and REINFORCE) is handed -A instead of A",
        "orchestrl/algorithms/neuromas/learner.py",
        "            advantages=batch[Postprocessing.ADVANTAGES],\n",
        "            advantages=-batch[Postprocessing.ADVANTAGES],\n",
        ("tests/algorithms/neuromas/test_learning.py::test_two_training_iterations_in_process",),
    ),
    Fault(
        "messages_not_cut",
        "NeuroMAS' cut variant (messages: none) is built with continuous messages: its composer still"
        " receives what the extractor read",
        "orchestrl/algorithms/neuromas/algorithm.py",
        '        "messages": knobs.messages,\n',
        '        "messages": "continuous" if knobs.messages == "none" else knobs.messages,\n',
        ("tests/algorithms/neuromas/test_cut.py",),
    ),
    Fault(
        "pointer_rows_from_another_agent",
        "NeuroMAS: an agent reuses another agent's encoder pass even when their observations differ"
        " (its pointer keys and reads come from what the other agent saw)",
        "orchestrl/algorithms/neuromas/network.py",
        "                    and torch.equal(obs[a], obs[b])\n",
        "",
        ("tests/algorithms/neuromas/test_cut.py",),
    ),
    Fault(
        "sandbox_memory_limit_off",
        "sandbox jobs run without the address-space limit",
        "orchestrl/envs/orchestration/sandbox/confine.py",
        '        "RLIMIT_AS": base_as + memory_mb * 2**20,\n',
        "",
        ("tests/envs/orchestration/test_orchestration_sandbox.py",),
    ),
)


def copy_repo(into: Path) -> None:
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, into / name)


def apply(fault: Fault, root: Path) -> None:
    path = root / fault.path
    text = path.read_text()
    if text.count(fault.old) != 1:
        raise SystemExit(f"fault {fault.name}: its original text is not (exactly once) in {fault.path}")
    path.write_text(text.replace(fault.old, fault.new))


def failed_tests(root: Path, tests: tuple[str, ...]) -> tuple[list[str], str]:
    """Runs ``tests`` in ``root`` (with ``root`` first on the path); returns the failed test ids."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *tests],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    lines = out.stdout.splitlines()
    failed = sorted({line.split()[1] for line in lines if line.startswith(("FAILED ", "ERROR "))})
    return failed, (lines[-1] if lines else out.stderr[-500:])


def run(faults: tuple[Fault, ...]) -> dict[str, object]:
    results: dict[str, object] = {}
    for fault in faults:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="orchestrl-mutant-") as tmp:
            root = Path(tmp)
            copy_repo(root)
            apply(fault, root)
            failed, last = failed_tests(root, fault.tests)
        results[fault.name] = {
            "fault": fault.what,
            "caught": bool(failed),
            "caught_by": failed,
            "pytest": last,
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(
            f"{fault.name}: {'caught by ' + ', '.join(failed) if failed else 'NOT CAUGHT'}", file=sys.stderr
        )
    results["all_caught"] = all(r["caught"] for r in results.values() if isinstance(r, dict))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = [f.name for f in FAULTS]
    parser.add_argument("--faults", nargs="+", choices=known, help="a subset of the faults")
    args = parser.parse_args(argv)
    chosen = tuple(f for f in FAULTS if not args.faults or f.name in args.faults)
    results = run(chosen)
    print(json.dumps(results, indent=2))
    return 0 if results["all_caught"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
