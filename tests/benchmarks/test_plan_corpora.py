"""Every hand-written plan corpus is what its ``make_wanted.py`` computes from its sources, and each
case's ``case.json`` is well formed (the corpora ``benchmarks/plan.py`` measures on)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.mark.parametrize("corpus", sorted(p.parent.name for p in DATA.glob("plan_cases*/make_wanted.py")))
def test_a_corpus_matches_its_pandas_functions(corpus: str) -> None:
    done = subprocess.run(
        [sys.executable, str(DATA / corpus / "make_wanted.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_check_fails_when_a_wanted_table_is_edited(tmp_path: Path) -> None:
    copy = tmp_path / "plan_cases_heldout"
    shutil.copytree(DATA / "plan_cases_heldout", copy)
    shutil.copy(DATA / "plan_corpus.py", tmp_path / "plan_corpus.py")
    wanted = next(copy.glob("*/wanted.csv"))
    wanted.write_text(wanted.read_text().replace("\n", "\n ", 1))
    done = subprocess.run(
        [sys.executable, str(copy / "make_wanted.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 1 and wanted.parent.name in done.stderr
