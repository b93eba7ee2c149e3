"""Run the test suite as tiers at once, one pytest process per marker expression (``make test``).

The tiers are chosen by what they wait on: the unit tests (no Ray) are CPU-bound; the integration
tests share one local Ray and mostly wait on servers and workers; the cluster tests start their
own multi-node Ray clusters and wait on job drivers. Run one after another they leave a 2-core
machine idle half the time.

The first tier's output streams; the others' reports follow once it ends. The last lines repeat
every failure of every tier and each tier's result line, so the tail of a CI log says what broke.
Exit status 1 when a tier fails (a tier that selects no tests, pytest's 5, is fine).

    python -m tools.test_tiers --tier "ray and not cluster" --tier cluster --tier "not ray" -- -x
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

NO_TESTS = 5
FAILURE = re.compile(r"^(FAILED|ERROR) ")


def pytest_command(tier: str, extra: list[str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        tier,
        "--durations=15",
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", action="append", required=True, help="a pytest -m expression")
    parser.add_argument("pytest_args", nargs="*", help="passed to every tier (after --)")
    args = parser.parse_args(argv)
    first, *rest = args.tier
    with tempfile.TemporaryDirectory(prefix="test-tiers-") as scratch:
        logs = {tier: Path(scratch) / f"tier{i}.log" for i, tier in enumerate(args.tier)}
        others = {}
        for tier in rest:
            with logs[tier].open("w") as log:
                others[tier] = subprocess.Popen(
                    pytest_command(tier, args.pytest_args), stdout=log, stderr=subprocess.STDOUT
                )
        names = ", ".join(repr(t) for t in args.tier)
        print(f"tiers running at once: {names}; streaming {first!r}", flush=True)
        with logs[first].open("wb") as log:
            streamed = subprocess.Popen(
                pytest_command(first, args.pytest_args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            assert streamed.stdout is not None
            # By chunk, not by line: pytest's progress dots come without a newline.
            for chunk in iter(lambda: streamed.stdout.read1(65536), b""):
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
                log.write(chunk)
            codes = {first: streamed.wait()}
        for tier, proc in others.items():
            codes[tier] = proc.wait()
            print(f"---------------- tier {tier!r} ----------------")
            print(logs[tier].read_text(), end="", flush=True)
        print("---------------- all tiers ----------------")
        reports = {tier: logs[tier].read_text().splitlines() or ["(no output)"] for tier in args.tier}
        for line in (line for lines in reports.values() for line in lines if FAILURE.match(line)):
            print(line)
        for tier, lines in reports.items():
            print(f"tier {tier!r}: {lines[-1]} (exit {codes[tier]})")
    return 1 if any(code not in (0, NO_TESTS) for code in codes.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
