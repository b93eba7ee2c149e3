"""Every fault of ``benchmarks/mutants.py`` still applies to today's code: its original text occurs
exactly once in its file, and the tests meant to catch it exist. (A fault whose text has drifted
would make the mutation check stop, or test nothing.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mutants", REPO / "benchmarks" / "mutants.py")
mutants = importlib.util.module_from_spec(spec)
sys.modules["mutants"] = mutants  # dataclasses look their module up there
spec.loader.exec_module(mutants)


@pytest.mark.parametrize("fault", mutants.FAULTS, ids=[f.name for f in mutants.FAULTS])
def test_the_fault_applies_and_its_tests_exist(fault) -> None:
    text = (REPO / fault.path).read_text()
    assert text.count(fault.old) == 1, f"{fault.name}: its original text is not exactly once in {fault.path}"
    assert fault.new != fault.old
    for test in fault.tests:
        assert (REPO / test.split("::")[0]).is_file(), test
