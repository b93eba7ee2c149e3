"""The plan benchmark's scoring: what counts as the wanted table, and one hand-made case of each
corpus planned and scored as the benchmark does (the synthesiser alone, no Ray)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from credit_helpers import load_benchmark, unload_benchmark

from orchestrl.apps.orchestration.plan import Planner


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    module = load_benchmark("plan")
    yield module
    unload_benchmark(module)


def test_exact_needs_the_columns_in_order_every_row_and_the_order_when_asked(bench: ModuleType) -> None:
    wanted = pd.DataFrame({"region": ["north", "south", "east"], "total": [3.0, 1.5, 2.0]})
    shuffled = wanted.iloc[[2, 0, 1]].reset_index(drop=True)
    assert bench.exact(wanted.copy(), wanted, ordered=True)
    assert bench.exact(shuffled, wanted, ordered=False)
    assert not bench.exact(shuffled, wanted, ordered=True)
    assert not bench.exact(wanted[["total", "region"]], wanted, ordered=False)
    assert not bench.exact(wanted.head(2), wanted, ordered=False)
    assert not bench.exact(wanted.assign(total=[3.0, 1.5, 2.5]), wanted, ordered=False)
    assert not bench.exact(None, wanted, ordered=False)


def test_one_case_per_corpus_is_planned_and_scored(bench: ModuleType) -> None:
    """The first case of every corpus is planned from its CSV files and scored against its wanted
    table (a held-out case may be missed: only the dev case must be exact); a wanted table with a
    row taken away never scores."""
    planner = Planner()
    try:
        for name, corpus in bench.CORPORA.items():
            folder = sorted(p for p in corpus.iterdir() if (p / "case.json").is_file())[0]
            case = bench.load_case(folder)
            rows, words = case["target_rows"], case["description"]
            plan = planner.plan(case["sources"], case["examples"], target_rows=rows, description=words)
            assert plan.match.ok, (name, folder.name, plan.notes)
            exact = bench.score(case, plan.spec_yaml)
            assert exact or name != "dev", (name, folder.name)
            wrong = {**case, "wanted": case["wanted"].iloc[1:]}
            assert not bench.score(wrong, plan.spec_yaml)
    finally:
        planner.close()


def test_a_corpus_s_figures_with_and_without_the_description(bench: ModuleType, tmp_path: Path) -> None:
    """One case whose examples cannot say where the list stops: exact with the user's words,
    not from the examples alone; the figures are the share of such cases."""
    talks = bench.CORPORA["dev"] / "38_top_rated_talk_submissions"
    shutil.copytree(talks, tmp_path / "corpus" / talks.name)
    planner = Planner()
    try:
        figures = bench.corpus_figures(tmp_path / "corpus", planner, None)
    finally:
        planner.close()
    assert figures["cases"] == 1 and figures["solver_holds_examples"] == 1.0
    assert (figures["solver_exact"], figures["solver_exact_examples_only"]) == (1.0, 0.0)


def test_a_corpus_of_your_own_is_a_folder_of_cases(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--corpora`` takes a corpus's name or a folder of cases (``examples/exports``, which the
    synthesiser plans exactly given each case's description); anything else exits 2 naming it."""
    exports = Path(__file__).resolve().parents[2] / "examples" / "exports"
    assert bench.corpus_path("dev") == bench.CORPORA["dev"]
    assert bench.corpus_path(str(exports)) == exports
    assert bench.corpus_path(str(tmp_path)) is None
    planner = Planner()
    try:
        figures = bench.corpus_figures(exports, planner, None)
    finally:
        planner.close()
    assert figures["cases"] == 2 and figures["solver_exact"] == 1.0
    monkeypatch.setattr("sys.argv", ["plan.py", "--corpora", str(tmp_path), "--no-env-gap"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    assert f"--corpora: {tmp_path}: neither a corpus name nor a folder" in capsys.readouterr().err
