"""What the user's words say about the rows to keep (:mod:`...synthesis.request`), and that the
synthesiser takes a filter the words name where the example rows cannot tell."""

from __future__ import annotations

import pandas as pd
import pytest

from orchestrl.envs.orchestration.plans import run_spec
from orchestrl.envs.orchestration.synthesis import synthesise
from orchestrl.envs.orchestration.synthesis.evidence import target_facts
from orchestrl.envs.orchestration.synthesis.proposer import cleanings, filters, joins, requested
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
        ("For bookings of three nights or more, the money taken", "nights", [("ge", 3.0)]),
        ("Reports at or over the 40mm intervention depth", "depth_mm", [("ge", 40.0)]),
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


@pytest.mark.parametrize(
    ("words", "value", "others", "named"),
    [
        ("Skip records with no count (heard only)", "heard only", (), False),  # the aside's clause
        ("Free school meals (tender FSM) aren't takings", "FSM", (), False),
        ("Only paid orders (not refunds)", "Paid", (), True),  # an aside with its own negation
        ("Only paid orders (not refunds)", "Refunded", (), False),
        ("Only lessons marked Attended count, not cancellations or no-shows", "Attended", (), True),
        ("Only lessons marked Attended count, not cancellations or no-shows", "Cancelled", (), False),
        ("Only lessons marked Attended count, not cancellations or no-shows", "No show", (), False),
        ("Fulfilled orders only, refunds and cancellations out", "Refunded", (), False),
        ("Plots that still owe their fee (unpaid or part paid)", "Part paid", ("Paid", "Part paid"), True),
        ("Plots that still owe their fee (unpaid or part paid)", "Paid", ("Paid", "Part paid"), None),
    ],
)
def test_a_value_is_kept_or_left_out_as_the_words_around_it_say(
    words: str, value: str, others: tuple[str, ...], named: bool | None
) -> None:
    """An aside says what its clause says unless it has a negation of its own; "only" beside a
    value keeps it in a clause that leaves others out; words are compared by stem
    ("cancellations", ``Cancelled``); a value inside a longer value's words is not named."""
    request = Request.read(words)
    assert request is not None and request.names(value, others) is named


@pytest.mark.parametrize(
    ("words", "column", "values", "kept"),
    [
        ("Billable hours per client this month and what to invoice each one", "billable", "YN", "Y"),
        ("The sessions we haven't invoiced yet, with the student's name", "Invoiced", ("Yes", "No"), "No"),
        ("Which hives had no queen seen at their most recent inspection?", "Queen Seen", ("Yes", "No"), "No"),
        ("Which hives had no queen seen at their most recent inspection?", "Eggs Seen", ("Yes", "No"), None),
        ("How many visits per yard and the total fees, paid or not", "paid", ("Yes", "No"), None),
        ("Billable hours per client", "billable", ("Y", "Maybe"), None),  # not a yes/no column
    ],
)
def test_a_yes_no_column_named_by_its_name_keeps_the_value_the_words_say(
    words: str, column: str, values: tuple[str, ...], kept: str | None
) -> None:
    request = Request.read(words)
    assert request is not None and request.flag(column, list(values)) == kept


def test_a_yes_no_column_the_request_names_is_a_requested_filter() -> None:
    timesheet = pd.DataFrame(
        {"client": ["A", "B", "A", "C", "B", "A"], "hours": [2.0, 1.5, 3.0, 0.5, 4.0, 1.0]}
        | {"billable": ["Y", "N", "Y", "Y", "N", "N"]}
    )
    named = [
        o.label for o in filters(timesheet, timesheet.head(0), Request.read("billable hours")) if requested(o)
    ]
    assert named == ["billable eq Y (requested)"]


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


def test_a_bound_goes_to_the_columns_whose_names_share_the_most_of_its_words() -> None:
    request = Request.read("Reports at or over the 40mm intervention depth. Dives to 30 m or deeper")
    assert request is not None
    placed = request.placed(["depth_mm", "width_mm", "Max Depth (m)", "Avg Depth (m)"])
    assert placed == {
        "depth_mm": [("ge", 40.0)],
        "Max Depth (m)": [("ge", 30.0)],
        "Avg Depth (m)": [("ge", 30.0)],
    }


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


@pytest.mark.parametrize(
    ("words", "latest"),
    [
        ("The export lists every change, newest first, so only each member's latest row counts.", True),
        ("Which hives had no queen seen at their most recent inspection?", True),
        ("How many people are currently subscribed, per country and plan?", True),
        ("Total sales per region, highest first. Not the cancelled ones.", False),
        ("The 5 fastest riders with their times.", False),
    ],
)
def test_a_request_says_whether_only_each_records_latest_row_counts(words: str, latest: bool) -> None:
    request = Request.read(words)
    assert request is not None and request.latest is latest


def test_a_change_log_said_to_count_at_its_latest_row_is_deduplicated_on_its_key() -> None:
    """Memberships repeat a member when the tier changes (newest first); the examples alone fit
    both every row and one per member, and the words decide: one row per member, marked as
    requested for the team, and the synthesiser's output keeps each member's latest tier."""
    log = pd.DataFrame(
        {
            "member_id": ["M07", "M03", "M01", "M02", "M03", "M04", "M05", "M06", "M01"],
            "name": ["Ada", "Cy", "Bo", "Di", "Cy", "Ed", "Fi", "Gus", "Bo"],
            "tier": ["Gold", "Silver", "Gold", "Silver", "Gold", "Bronze", "Gold", "Silver", "Silver"],
            "updated": [
                "2026-05-09", "2026-05-02", "2026-04-20", "2026-04-02", "2026-03-30",
                "2026-03-11", "2026-03-02", "2026-02-14", "2026-01-20",
            ],
        }
    )  # fmt: skip
    wanted = log.drop_duplicates("member_id")[["member_id", "tier"]].reset_index(drop=True)
    examples = wanted.head(3)
    said = "Each member's tier; the CRM export lists every change, newest first, so go by the latest row."
    keyed = [o for o in cleanings(log, target_facts(examples), request=Request.read(said)) if o.steps]
    plain = [o for o in cleanings(log, target_facts(examples)) if o.steps]
    assert (
        [o.steps[-1].duty.subset for o in keyed]
        == [("member_id",)]
        == [o.steps[-1].duty.subset for o in plain]
    )
    assert requested(keyed[0]) and not requested(plain[0])
    assert keyed[0].log_prior > plain[0].log_prior
    found = synthesise({"log": log}, examples, description=said)
    assert found.spec is not None
    assert same_table(run_spec({"log": log}, found.spec).output, wanted)


@pytest.mark.parametrize(
    ("words", "keeps"),
    [
        ("Unpaid invoices with the client's email where I have it so I can chase them.", True),
        ("Keep the visit even if the account isn't on the client list yet.", True),
        ("Two were phone bookings who aren't in the customer list; keep them in.", True),
        ("Orders ready for pickup with the customer's phone (keep tickets we can't match).", True),
        ("Tickets sold per event and the venue's city.", False),
    ],
)
def test_a_request_says_whether_rows_a_lookup_lacks_are_kept(words: str, keeps: bool) -> None:
    request = Request.read(words)
    assert request is not None and request.keeps_unmatched is keeps


def test_a_lookup_the_request_says_to_keep_unmatched_rows_of_is_left_joined() -> None:
    """One job names a client the client list lacks, and the first rows shown all have a client:
    an inner and a left join both hold them, and the words decide for the left join, marked as
    requested for the team; the synthesiser's output keeps the unmatched job."""
    jobs = pd.DataFrame(
        {
            "job": [f"J{i}" for i in range(1, 9)],
            "client": ["C1", "C2", "C1", "C3", "C2", "C1", "C9", "C3"],
            "hours": [3.0, 2.5, 4.0, 1.0, 6.5, 2.0, 3.5, 5.0],
        }
    )
    clients = pd.DataFrame({"client": ["C1", "C2", "C3"], "phone": ["0101", "0202", "0303"]})
    wanted = jobs.merge(clients, on="client", how="left")[["job", "client", "phone", "hours"]]
    said = "Every job with the client's phone where we have it."
    options = joins(jobs, clients, "clients", needed=True, request=Request.read(said))
    plain = joins(jobs, clients, "clients", needed=True)
    assert [o.steps[0].duty.how for o in options if requested(o)] == ["left"]
    assert not any(requested(o) for o in plain)
    assert options[0].steps[0].duty.how == "left"
    sources = {"jobs": jobs, "clients": clients}
    found = synthesise(sources, wanted.head(5), description=said)
    assert found.spec is not None
    assert same_table(run_spec(sources, found.spec).output, wanted)
