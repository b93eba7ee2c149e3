"""`make test`'s runner: tiers run at once, a failing tier fails the run and is named at the end."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import test_tiers

TESTS = """
import pytest

def test_plain():
    pass

@pytest.mark.slow
def test_slow_fails():
    assert 1 == 2
"""


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "test_suite.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: marked\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_every_tier_runs_and_a_failing_one_fails_the_run_and_is_repeated_last(
    suite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = test_tiers.main(["--tier", "not slow", "--tier", "slow", "--", str(suite)])
    out = capsys.readouterr().out
    assert code == 1
    tail = out[out.index("---- all tiers ----") :].splitlines()
    assert tail[1].startswith("FAILED test_suite.py::test_slow_fails")
    assert tail[2].startswith("tier 'not slow': 1 passed, 1 deselected") and tail[2].endswith("(exit 0)")
    assert tail[3].startswith("tier 'slow': 1 failed, 1 deselected") and tail[3].endswith("(exit 1)")


def test_passing_tiers_and_a_tier_without_tests_pass(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = test_tiers.main(["--tier", "not slow", "--tier", "nothing_has_this_mark", "--", str(suite)])
    out = capsys.readouterr().out
    assert code == 0
    assert "(exit 5)" in out and "FAILED" not in out
