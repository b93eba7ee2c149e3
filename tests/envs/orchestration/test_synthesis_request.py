"""What the user's words say about the rows to keep (:mod:`...synthesis.request`), and that the
synthesiser takes a filter the words name where the example rows cannot tell."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrl.envs.orchestration.plans import run_spec
from orchestrl.envs.orchestration.synthesis import synthesise
from orchestrl.envs.orchestration.synthesis.proposer import filters
from orchestrl.envs.orchestration.synthesis.request import Request, normalise
from orchestrl.envs.orchestration.tables import same_table


@pytest.mark.parametrize(
    ("words", "column", "bounds"),
    [
        ("List the parking sessions of 3 hours or more, with the fee", "Hours", [("ge", 3.0)]),
        ("List the parking sessions of 3 hours or more, with the fee", "Fee", []),
        ("runs that put down more than 6 tonnes of salt", "Salt (t)", [("gt", 6.0)]),
        ("talks with an average review score of 4 or more", "Avg Score", [("ge", 4.0)]),
        ("orders of no more than 5 items", "Items", [("le", 5.0)]),
        ("invoices under $1,500", "Invoice Amount", [("lt", 1500.0)]),
        ("at least 30 minutes late", "Minutes Late", [("ge", 30.0)]),
        ("every 2026 receipt", "Year", []),
        ("dives of 1.5 hours or longer. Deepest first", "Dive Hours", [("ge", 1.5)]),
    ],
)
def test_bounds_are_a_number_a_direction_and_the_words_beside_them(
    words: str, column: str, bounds: list[tuple[str, float]]
) -> None:
    request = Request.read(words)
    assert request is not None and request.bounds_on(column) == bounds


def test_values_named_are_kept_and_values_in_a_clause_that_leaves_them_out_are_not() -> None:
    request = Request.read("Top 3 drivers: cash, app and council jobs don't count. Corporate work only.")
    assert request is not None
    assert (request.names("Corporate"), request.names("Cash"), request.names("App")) == (True, False, False)
    assert request.names("Account") is None and request.names("No") is None  # not named; a function word
    assert Request.read("skip voided tickets").names("Void") is False  # a value named with an ending
    assert Request.read("each click-charge copier").names("Click charge") is True
    assert Request.read("   ") is None and Request.read(None) is None


def test_a_column_said_to_be_missing_is_to_be_filled() -> None:
    request = Request.read("Skip records with no count (heard only), and no more than 5 per site")
    assert request is not None and request.wants_filled("count") and not request.wants_filled("site")
    assert not request.wants_filled("more")


def test_normalise_reads_hyphens_thousands_and_punctuation_as_a_person_would() -> None:
    assert normalise("Click-Charge, £1,500.50 (Net)!") == "click charge £1500.50 net"


def test_named_filters_are_likelier_than_no_filter_and_the_examples_still_screen_them() -> None:
    """Regions North and East are named: the set of both is proposed, likelier than no filter; the
    example rows show both, so keeping one of them alone is screened out."""
    sales = pd.DataFrame({"region": ["North", "East", "South", "West"] * 3, "amount": range(12)})
    examples = sales[sales.region.isin(["North", "East"])].head(4)
    named = [
        o
        for o in filters(sales, examples, Request.read("sales in the North and East regions"))
        if o.log_prior > 0
    ]
    assert [o.steps[0].duty.value for o in named] == [("East", "North")]


def test_a_bound_the_examples_cannot_show_is_taken_from_the_words() -> None:
    """The longest stays first: five example rows of 8 hours and more cannot say where the list
    stops; "3 hours or more" says it."""
    stays = pd.DataFrame(
        {"plate": [f"P{i}" for i in range(12)], "hours": [12, 1, 9, 3, 2, 8, 4, 10, 1, 11, 2, 6]}
    )
    wanted = stays[stays.hours >= 3].sort_values("hours", ascending=False).reset_index(drop=True)
    for words, exact in (("parking stays of 3 hours or more, longest first", True), (None, False)):
        found = synthesise({"stays": stays}, wanted.head(5), description=words)
        assert found.spec is not None
        output = run_spec({"stays": stays}, found.spec).output.reset_index(drop=True)
        assert same_table(output, wanted) is exact


def test_a_bound_that_names_no_column_goes_to_the_number_columns_it_falls_within() -> None:
    """ "30 cubic metres or more" names no column of the jobs (``Vol (m3)``): it is a filter on each
    number column whose values lie on both sides of 30, sharing its weight; not on the price."""
    request = Request.read("The big moves, 30 cubic metres or more. Completed moves only")
    assert request is not None and request.unplaced(["Vol (m3)", "Quote"]) == [("ge", 30.0)]
    jobs = pd.DataFrame(
        {
            "Vol (m3)": [42.0, 18.5, 55.0, 30.0, 12.0, 36.0],
            "Quote": [1380.0, 640.0, 2150.0, 1095.0, 420.0, 1200.0],
            "Status": ["Completed", "Completed", "Cancelled", "Completed", "Completed", "Completed"],
        }
    )
    named = {o.label: o.log_prior for o in filters(jobs, jobs.head(0), request) if "requested" in o.label}
    assert set(named) == {"Vol (m3) ge 30.0 (requested)", "Status eq Completed (requested)"}
    assert named["Vol (m3) ge 30.0 (requested)"] > 0


def test_a_value_with_a_number_is_named_by_its_words_unless_another_value_has_them_too() -> None:
    request = Request.read("Who still owes subs for this autumn term? Court usage for each court.")
    assert request is not None
    assert request.names("Autumn 2026", ["Summer 2026", "Autumn 2026"]) is True
    assert request.names("Court 1", ["Court 1", "Court 2"]) is None  # "court" names every court
    assert request.names("Summer 2026", ["Summer 2026", "Autumn 2026"]) is None
