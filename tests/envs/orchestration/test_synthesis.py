"""The synthesiser (``orchestrl plan``'s search) on hand-made exports from ``tests/data/plan_cases``,
the spec's new duties (rewrites of one column, ``in`` and ``ge``/``le`` filters, several measures,
sort without a cut) through the compiled pipeline, and what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from orchestrl.envs.orchestration import ops
from orchestrl.envs.orchestration.compiler import compile_spec
from orchestrl.envs.orchestration.plans import run_spec
from orchestrl.envs.orchestration.spec import DeriveDuty, FilterDuty, Role, SpecError, parse_spec
from orchestrl.envs.orchestration.synthesis import synthesise
from orchestrl.envs.orchestration.synthesis.evidence import column_facts, target_facts, unproducible
from orchestrl.envs.orchestration.synthesis.proposer import cleanings, filters, joins, kept_rows
from orchestrl.envs.orchestration.tables import TargetIndex, same_table

CASES = Path(__file__).resolve().parents[2] / "data" / "plan_cases"


def load(name: str) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, pd.DataFrame, dict]:
    folder = CASES / name
    meta = json.loads((folder / "case.json").read_text())
    sources = {s: pd.read_csv(folder / f"{s}.csv") for s in meta["sources"]}
    return sources, pd.read_csv(folder / "target_example.csv"), pd.read_csv(folder / "wanted.csv"), meta


@pytest.mark.parametrize(
    "case",
    [
        "01_shipped_order_revenue",  # a filter the example rows show, a derived column
        "03_payroll_cost_by_department",  # duplicates, currency text, a join on differently named keys
        "10_active_listings_price_per_sqft",  # two filters, a ratio, rounding, a sort
        "28_tenants_with_balance",  # NA tokens among numbers, a threshold, fewer rows than asked
    ],
)
def test_the_synthesiser_writes_the_wanted_table(case: str) -> None:
    sources, examples, wanted, meta = load(case)
    found = synthesise(sources, examples, meta["target_rows"])
    assert found.spec is not None, found
    output = run_spec(sources, found.spec).output
    assert list(output.columns) == list(wanted.columns)
    assert TargetIndex(wanted).compare(output).exact
    if meta["ordered"]:
        assert same_table(output.reset_index(drop=True).astype(wanted.dtypes.to_dict()), wanted)


@pytest.mark.parametrize("measure", ["spend", "avg_qty", "top_qty", "lines", "products"])
def test_grouped_measures_skip_missing_values_as_pandas_does(measure: str) -> None:
    """Per-group sum of a product, mean, max, count and distinct count over columns with missing
    values: the search's own per-group arithmetic must agree with the pipeline's pandas."""
    orders = pd.DataFrame(
        {
            "customer": ["ann", "ann", "bob", "bob", "bob", "cy", "cy", "dee"],
            "product": ["pen", "ink", "pen", "pen", None, "cap", "ink", "pen"],
            "qty": [2.0, None, 3.0, 1.0, 4.0, None, None, 5.0],
            "price": [1.5, 4.0, 1.5, 1.5, 2.25, 3.0, 4.0, 1.5],
        }
    )
    grouped = orders.assign(spend=orders.qty * orders.price).groupby("customer", as_index=False)
    wanted = {
        "spend": grouped.agg(spend=("spend", "sum")),
        "avg_qty": grouped.agg(avg_qty=("qty", "mean")),
        "top_qty": grouped.agg(top_qty=("qty", "max")),
        "lines": grouped.agg(lines=("qty", "count")),
        "products": grouped.agg(products=("product", "nunique")),
    }[measure]
    examples = wanted.dropna().round(2)  # cy's mean and max of no quantity are missing
    found = synthesise({"orders": orders}, examples)
    assert found.spec is not None, found
    output = run_spec({"orders": orders}, found.spec).output
    assert TargetIndex(examples).compare(output).exact or same_table(
        output.dropna().reset_index(drop=True).round(2), examples.reset_index(drop=True)
    )


def test_a_per_group_mean_of_a_ratio_leaves_out_division_by_zero() -> None:
    """The mean price per unit of each customer, where one line has no quantity (0): the ratio
    there is missing, not infinite, in the search's screen and in the pipeline alike."""
    orders = pd.DataFrame(
        {
            "customer": ["ann", "ann", "bob", "bob", "cy", "cy"],
            "amount": [10.0, 6.0, 9.0, 5.0, 8.0, 3.0],
            "qty": [2.0, 0.0, 3.0, 5.0, 4.0, 1.0],
        }
    )
    unit = (orders.amount / orders.qty).replace([float("inf"), -float("inf")], float("nan"))
    wanted = (
        orders.assign(unit_price=unit)
        .groupby("customer", as_index=False)
        .agg(unit_price=("unit_price", "mean"))
    )
    found = synthesise({"orders": orders}, wanted)
    assert found.spec is not None, found
    output = run_spec({"orders": orders}, found.spec).output
    assert same_table(output.reset_index(drop=True), wanted)


def test_a_search_with_nothing_to_find_returns_no_program() -> None:
    sources = {"t": pd.DataFrame({"a": ["x", "y", "z"], "n": [1, 2, 3]})}
    examples = pd.DataFrame({"a": ["x"], "n": [99]})  # 99 is no column's value, sum, count...
    found = synthesise(sources, examples)
    assert found.program is None and found.candidates >= 1


def test_the_new_duties_compile_to_the_code_run_in_process(tmp_path: Path) -> None:
    sources = {
        "orders": pd.DataFrame(
            {
                "id": [1, 2, 3, 4, 4],
                "Region": [" north", "North ", "south", "EAST", "EAST"],
                "amount": ["$1,200.50", "12%", "N/A", "(30)", "(30)"],
                "day": ["03/15/2024", "04/01/2024", "12/31/2023", "01/02/2024", "01/02/2024"],
                "qty": [2, 3, 4, 5, 5],
            }
        )
    }
    spec = parse_spec(
        {
            "sources": ["orders"],
            "nodes": [
                {"id": "a", "role": "dedup", "duty": {}, "deps": ["orders"]},
                {
                    "id": "b",
                    "role": "derive",
                    "duty": {"name": "Region", "op": "trim", "left": "Region"},
                    "deps": ["a"],
                },
                {
                    "id": "c",
                    "role": "derive",
                    "duty": {"name": "Region", "op": "title", "left": "Region"},
                    "deps": ["b"],
                },
                {
                    "id": "d",
                    "role": "derive",
                    "duty": {"name": "amount", "op": "number", "left": "amount"},
                    "deps": ["c"],
                },
                {
                    "id": "e",
                    "role": "derive",
                    "duty": {"name": "day", "op": "date", "left": "day", "fmt": "%m/%d/%Y"},
                    "deps": ["d"],
                },
                {
                    "id": "f",
                    "role": "filter",
                    "duty": {"column": "Region", "op": "in", "value": ["North", "East"]},
                    "deps": ["e"],
                },
                {
                    "id": "g",
                    "role": "filter",
                    "duty": {"column": "qty", "op": "ge", "value": 2},
                    "deps": ["f"],
                },
                {
                    "id": "h",
                    "role": "aggregate",
                    "duty": {
                        "by": ["Region"],
                        "column": "amount",
                        "fn": "sum",
                        "name": "total",
                        "more": [["orders", "size", None], ["days", "nunique", "day"]],
                    },
                    "deps": ["g"],
                },
                {
                    "id": "i",
                    "role": "derive",
                    "duty": {"name": "total", "op": "round", "left": "total", "digits": 0},
                    "deps": ["h"],
                },
                {
                    "id": "j",
                    "role": "topk",
                    "duty": {"column": "total", "k": None, "ascending": True},
                    "deps": ["i"],
                },
            ],
        }
    )
    namespace: dict = {}
    exec(compile(compile_spec(spec).source, "pipeline.py", "exec"), namespace)  # the stand-alone module
    compiled = namespace["run"](sources)["j"][0]
    in_process = run_spec(sources, spec).output
    assert same_table(compiled, in_process)
    expected = pd.DataFrame(
        {"Region": ["East", "North"], "total": [-30.0, 1212.0], "orders": [1, 2], "days": [1, 2]}
    )
    assert same_table(in_process.reset_index(drop=True), expected), in_process


@pytest.mark.parametrize(
    ("duty", "code"),
    [
        ({"name": "x", "op": "round", "left": "a"}, "round takes digits"),
        ({"name": "x", "op": "date", "left": "a"}, "date takes the format"),
        ({"name": "x", "op": "date", "left": "a", "fmt": "%d'); import os; ('"}, "string_pattern_mismatch"),
        ({"name": "x", "op": "trim", "left": "a", "right": "b"}, "rewrites one column"),
        ({"name": "x", "op": "mul", "left": "a"}, "two operands"),
    ],
)
def test_derive_duties_are_checked(duty: dict, code: str) -> None:
    spec = {"sources": ["t"], "nodes": [{"id": "n", "role": "derive", "duty": duty, "deps": ["t"]}]}
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert code in str(caught.value)


def test_filters_in_and_thresholds_are_checked() -> None:
    for duty in ({"column": "a", "op": "in", "value": []}, {"column": "a", "op": "ge", "value": "x"}):
        spec = {"sources": ["t"], "nodes": [{"id": "n", "role": "filter", "duty": duty, "deps": ["t"]}]}
        with pytest.raises(SpecError):
            parse_spec(spec)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("$1,234.50", 1234.5),
        ("€12", 12.0),
        ("12%", 12.0),
        ("(30)", -30.0),
        ("EUR 7.5", 7.5),
        ("USD1,200", 1200.0),
        ("12.50 GBP", 12.5),
        ("Bay 12", None),  # a name
        ("ACC-1051", None),  # an account number, not minus 1,051 in some currency
        ("ATV20", None),  # a product code
        ("N/A", None),
        ("-", None),
        ("twelve", None),
        (3, 3.0),
    ],
)
def test_numbers_written_as_text_are_parsed(text: object, number: float | None) -> None:
    assert ops.parse_number(text) == number


def test_evidence_reads_dirt_off_the_data() -> None:
    frame = pd.DataFrame(
        {
            "price": ["$1.00", "$2,000.00", "-", "$3.50"],
            "day": ["15.03.2024", "01.04.2024", "02.04.2024", "30.12.2023"],
            "status": ["Open", "open", " closed", "Open"],
            "id": [1, 2, 3, 4],
        }
    )
    facts = column_facts(frame)
    assert facts["price"].kind == "number_text"
    assert facts["day"].kind == "date_text" and facts["day"].date_formats == ("%d.%m.%Y",)
    assert facts["status"].case_variants and facts["status"].spaces
    assert facts["id"].key and not facts["status"].key


def test_a_text_column_no_source_holds_is_unproducible() -> None:
    sources = {"t": pd.DataFrame({"city": ["Leeds", "York"], "n": [1, 2]})}
    examples = pd.DataFrame({"City": ["leeds "], "country": ["UK"], "total": [3]})
    assert unproducible(sources, examples) == ["country"]


def shipments() -> pd.DataFrame:
    """Shipments per service and state: within the groups the examples show every customer ships
    once; elsewhere some ship twice."""
    rows = [
        ("air", "CA", "ann", 120.0),
        ("air", "CA", "bob", 80.0),
        ("air", "NY", "cy", 95.0),
        ("ground", "CA", "dee", 40.0),
        ("ground", "CA", "eve", 55.0),
        ("ground", "CA", "fay", 30.0),
        ("ground", "NY", "gus", 60.0),
        ("sea", "CA", "hal", 20.0),
        ("sea", "CA", "hal", 25.0),
        ("sea", "NY", "ida", 35.0),
        ("sea", "NY", "ida", 15.0),
        ("sea", "NY", "jo", 10.0),
    ]
    return pd.DataFrame(rows, columns=["service", "state", "customer", "cost"])


@pytest.mark.parametrize(
    ("measure", "fn", "column"),
    [
        ("max_cost", "max", "cost"),
        ("Lowest Cost", "min", "cost"),
        ("unique_customers", "nunique", "customer"),
    ],
)
def test_a_measure_s_name_says_its_function(measure: str, fn: str, column: str) -> None:
    """A per-group max is also a value of some row, and a distinct count equals the row count where
    no customer repeats: the example rows fit a plain selection or the wrong function, and only
    the target's name ("max", "lowest", "unique") says what the whole table holds."""
    frame = shipments()
    wanted = frame.groupby(["service", "state"], as_index=False).agg(**{measure: (column, fn)})
    examples = wanted.iloc[:4]  # air and ground: no customer ships twice there
    found = synthesise({"shipments": frame}, examples)
    assert found.spec is not None, found
    output = run_spec({"shipments": frame}, found.spec).output
    assert TargetIndex(wanted).compare(output).exact


def test_a_set_of_values_the_examples_happen_to_show_is_not_taken_for_a_filter() -> None:
    """Orders with repeated rows; the wanted table is every order once. Five example rows show 4 of
    the 10 products, as five rows often do: a filter keeping those 4 also holds them, and keeps a
    smaller table, but it is one of 210 such sets and nothing else asks for it."""
    products = [f"p{i}" for i in range(10)]
    orders = pd.DataFrame(
        {
            "order_id": range(1, 41),
            "product": [products[i % 10] for i in range(40)],
            "qty": [1 + (i * 7) % 5 for i in range(40)],
        }
    )
    dirty = pd.concat([orders, orders.iloc[[3, 8, 15, 22, 31, 36]]], ignore_index=True)
    examples = orders.iloc[[0, 10, 1, 21, 2]].reset_index(drop=True)  # products p0, p1, p2
    examples = pd.concat([examples, orders.iloc[[13]]], ignore_index=True)  # and p3
    found = synthesise({"orders": dirty}, examples)
    assert found.spec is not None, found
    output = run_spec({"orders": dirty}, found.spec).output
    assert TargetIndex(orders).compare(output).exact


def invoices() -> dict[str, pd.DataFrame]:
    """Invoices of six clients, two of whom the client list does not have."""
    rows = [
        ("I-01", "acme", "Logo", 1200.0, "unpaid"),
        ("I-02", "bolt", "Site", 450.0, "unpaid"),
        ("I-03", "core", "Copy", 2300.0, "paid"),
        ("I-04", "core", "Audit", 700.0, "unpaid"),
        ("I-05", "acme", "Deck", 1800.0, "unpaid"),
        ("I-06", "bolt", "Blog", 2100.0, "unpaid"),
        ("I-07", "fern", "App", 3100.0, "paid"),
        ("I-08", "dune", "Menu", 1500.0, "unpaid"),
        ("I-09", "echo", "Ads", 1100.0, "unpaid"),
        ("I-10", "acme", "Print", 1300.0, "unpaid"),
    ]
    frame = pd.DataFrame(rows, columns=["invoice", "client", "project", "amount", "status"])
    clients = pd.DataFrame(
        {"name": ["acme", "bolt", "core", "fern"], "email": ["a@x.io", "b@x.io", "c@x.io", "f@x.io"]}
    )
    return {"invoices": frame, "clients": clients}


def test_an_output_that_lists_the_fact_rows_keeps_those_no_lookup_row_matches() -> None:
    """Unpaid invoices with the client's email: dune and echo are not in the client list, and a
    list of invoices (it shows their number) keeps them with no email (a left join), where an
    inner join would drop them unseen by the four example rows."""
    tables = invoices()
    wanted = tables["invoices"].query("status == 'unpaid'")
    wanted = wanted.merge(tables["clients"], left_on="client", right_on="name", how="left")
    wanted = wanted[["invoice", "client", "amount", "email"]]
    found = synthesise(tables, wanted.head(4))
    assert found.spec is not None, found
    output = run_spec(tables, found.spec).output
    assert TargetIndex(wanted).compare(output).exact


def test_no_filter_is_proposed_that_drops_a_value_the_examples_show() -> None:
    """The example rows show clients acme and bolt: a filter keeping one client, or dropping one
    of them, cannot be the answer; nor one on a column of text written once per row (project
    names), nor two filters keeping the same rows (only the likelier is searched)."""
    frame = invoices()["invoices"]
    examples = frame.iloc[[0, 1]][["invoice", "client", "amount"]]
    proposed = [o.steps[0].duty for o in filters(frame, examples)]
    on = {(d.column, d.op, d.value if d.op != "in" else tuple(d.value)) for d in proposed}
    assert ("client", "eq", "acme") not in on and ("client", "ne", "bolt") not in on
    assert ("client", "ne", "core") in on and ("status", "eq", "unpaid") in on
    assert not any(d.column == "project" for d in proposed)
    assert ("amount", "lt", 1000.0) not in on  # drops I-01 (1,200), an example row
    kept = [tuple(run_spec_filter(frame, d)) for d in proposed]
    assert len(kept) == len(set(kept))


def run_spec_filter(frame: pd.DataFrame, duty) -> list[int]:
    return list(ops.op_filter(frame, duty.column, duty.op, duty.value, "small")[0].index)


@pytest.mark.parametrize(
    ("column", "op", "value"),
    [
        ("status", "eq", "open"),
        ("status", "ne", "open"),
        ("status", "in", ("open", "closed")),
        ("status", "notnull", None),
        ("amount", "gt", 10.0),
        ("amount", "le", 10.0),
        ("price", "ge", 2.0),
    ],
)
def test_the_proposer_reads_the_rows_a_filter_keeps_as_the_compiled_pipeline_keeps_them(
    column: str, op: str, value: object
) -> None:
    """``kept_rows`` reads ``filter_mask`` without taking the rows; missing values and numbers
    written as text included, it keeps exactly the rows ``op_filter`` keeps."""
    frame = pd.DataFrame(
        {
            "status": ["open", None, "closed", "open", "Open", "closed"],
            "amount": [5.0, 12.0, None, 10.0, 30.0, 11.0],
            "price": ["$1.00", "2.5", None, "n/a", "3", "$2.00"],
        }
    )
    duty = FilterDuty(column=column, op=op, value=value)
    kept = kept_rows(frame, duty).tolist()
    assert kept == run_spec_filter(frame, duty)
    assert 0 < len(kept) < len(frame)


def test_a_date_format_must_read_every_value_not_only_the_first() -> None:
    frame = pd.DataFrame(
        {"due": ["15.03.2024", "01.04.2024", "next week"], "day": ["soon", "01.04.2024", "x"]}
    )
    facts = column_facts(frame)
    assert facts["due"].kind == "text" and facts["due"].date_formats == ()
    assert facts["day"].kind == "text" and facts["day"].date_formats == ()


def test_a_change_log_is_deduplicated_on_its_id_not_on_a_date_rows_share() -> None:
    """Reviews, newest first, two edited (their ids repeat, with the same user and territory): a
    date also repeats, and has more distinct values than the id, but a day is not an identity; a
    rating repeats too, across different reviews."""
    reviews = pd.DataFrame(
        {
            "reviewId": ["r9", "r8", "r7", "r6", "r5", "r4", "r3", "r8", "r2", "r6"],
            "user": ["ann", "bob", "cy", "dee", "eve", "fay", "gus", "bob", "hal", "dee"],
            "territory": ["GB", "DE", "US", "US", "FR", "GB", "DE", "DE", "US", "US"],
            "appVersion": ["2.1", "2.1", "2.1", "2.0", "2.0", "2.0", "1.9", "2.0", "1.9", "1.9"],
            "rating": [5, 4, 3, 2, 1, 2, 4, 1, 5, 3],
            "reviewDate": [f"2026-03-{d:02d}" for d in (19, 18, 17, 16, 15, 14, 13, 13, 12, 11)],
        }
    )
    options = cleanings(reviews, target_facts(pd.DataFrame({"appVersion": ["2.1"], "reviews": [3]})))
    dedups = [s.duty.subset for o in options for s in o.steps if s.role is Role.DEDUP]
    assert dedups == [("reviewId",)]


def test_dates_and_times_written_in_one_shape_sort_in_time_order() -> None:
    frame = pd.DataFrame(
        {"when": ["2026-03-02", "2025-12-31", "2026-01-15"], "time": ["3:04:12", "2:59:59", "3:00:01"]}
    )
    by_date, _ = ops.op_topk(frame, "when", None, True, "small")
    by_time, _ = ops.op_topk(frame, "time", 2, True, "small")
    assert list(by_date["when"]) == ["2025-12-31", "2026-01-15", "2026-03-02"]
    assert list(by_time["time"]) == ["2:59:59", "3:00:01"]


def test_the_examples_sorted_by_date_are_the_head_of_a_sort_by_that_date() -> None:
    """Jobs due on dates written as ``Nov 03, 2026``; the user wants the open ones, soonest first."""
    jobs = pd.DataFrame(
        {
            "job": [f"J-{i}" for i in range(1, 11)],
            "due": [f"Nov {d:02d}, 2026" for d in (14, 3, 22, 9, 1, 17, 5, 28, 4, 7)],
            "state": ["open", "open", "done", "open", "open", "done", "open", "open", "done", "open"],
        }
    )
    wanted = jobs[jobs.state == "open"].assign(due=lambda f: pd.to_datetime(f.due, format="%b %d, %Y"))
    wanted = wanted.sort_values("due").assign(due=lambda f: f.due.dt.strftime("%Y-%m-%d"))[["job", "due"]]
    found = synthesise({"jobs": jobs}, wanted.head(5).reset_index(drop=True))
    assert found.spec is not None, found
    output = run_spec({"jobs": jobs}, found.spec).output.reset_index(drop=True)
    assert same_table(output, wanted.reset_index(drop=True))


@pytest.mark.parametrize(
    ("value", "title"),
    [
        ("fresh produce", "Fresh Produce"),
        ("Fresh produce", "Fresh Produce"),
        ("DRY GOODS", "Dry Goods"),
        ("MacLeod", "MacLeod"),
        ("iPhone case", "iPhone case"),
    ],
)
def test_title_case_capitalises_every_word_but_keeps_capitals_inside_words(value: str, title: str) -> None:
    frame, _ = ops.op_derive(pd.DataFrame({"c": [value]}), "c", "title", "c", None, "small")
    assert frame["c"].tolist() == [title]


def test_a_column_of_numbers_among_a_few_words_is_read_as_numbers_when_the_examples_show_numbers() -> None:
    """Vintages with 'NV' for non-vintage wines: the wanted reds all have a year, shown as numbers."""
    cellar = pd.DataFrame(
        {
            "bin": [f"A{i:02d}" for i in range(1, 11)],
            "type": ["red", "red", "white", "red", "sparkling", "red", "white", "red", "sparkling", "red"],
            "vintage": ["2018", "2019", "2021", "2016", "NV", "2020", "2022", "2015", "NV", "2017"],
        }
    )
    wanted = cellar[cellar.type == "red"].assign(vintage=lambda f: f.vintage.astype(int))[["bin", "vintage"]]
    found = synthesise({"cellar": cellar}, wanted.head(5).reset_index(drop=True))
    assert found.spec is not None, found
    assert TargetIndex(wanted).compare(run_spec({"cellar": cellar}, found.spec).output).exact


def test_a_measure_named_after_a_column_counts_that_column_s_values() -> None:
    """'Transects' per species is the number of distinct transects, not of sightings, though the
    two agree on the example rows (no species there was seen twice on one transect)."""
    seen = {
        "jay": "T1 T2",
        "owl": "T3",
        "robin": "T1 T2 T3",
        "swift": "T2",
        "tit": "T1 T3",
        "wren": "T1 T1 T2",
    }
    rows = [(species, t) for species, ts in seen.items() for t in ts.split()]
    sightings = pd.DataFrame(rows, columns=["species", "transect"]).assign(
        birds=lambda f: range(1, len(f) + 1)
    )
    wanted = sightings.groupby("species", as_index=False).agg(
        Birds=("birds", "sum"), Transects=("transect", "nunique")
    )
    found = synthesise({"sightings": sightings}, wanted.head(5))  # wren, seen twice on T1, is the 6th
    assert found.spec is not None, found
    assert TargetIndex(wanted).compare(run_spec({"sightings": sightings}, found.spec).output).exact


def test_fewer_example_rows_than_asked_for_are_the_whole_table() -> None:
    """Three example rows, the whole wanted table: it takes three filters to keep only them, where
    keeping every row (or the four rows of two of the filters) holds them too."""
    rows = [
        (
            f"B{i:02d}",
            "void" if i % 3 == 0 else "ok",
            "foot" if i % 4 == 3 else "car",
            "out" if i % 5 == 0 else "in",
        )
        for i in range(60)
    ]
    bookings = pd.DataFrame(rows, columns=["ref", "status", "vehicle", "route"])
    wanted = bookings.query("status == 'void' and vehicle == 'car' and route == 'out'")[["ref"]]
    assert len(wanted) == 3 and len(bookings.query("status == 'void' and route == 'out'")) == 4
    found = synthesise({"bookings": bookings}, wanted.reset_index(drop=True))
    assert found.spec is not None, found
    assert TargetIndex(wanted).compare(run_spec({"bookings": bookings}, found.spec).output).exact


def test_a_key_of_the_same_name_with_unmatched_rows_offers_a_left_join() -> None:
    """One ticket in ten names a customer the list lacks: the keys' overlap (0.9) is below 1 even
    though their equal names rank the pair first."""
    tickets = pd.DataFrame(
        {"ticket": [f"T{i}" for i in range(10)], "customer_id": ["C1", "C2", "C3"] * 3 + ["C9"]}
    )
    customers = pd.DataFrame({"customer_id": ["C1", "C2", "C3"], "name": ["ann", "bob", "cy"]})
    hows = [
        o.steps[0].duty.how
        for o in joins(tickets, customers, "customers", needed=True, listed=True)
        if o.steps
    ]
    assert hows[0] == "left" and "inner" in hows


def test_a_category_with_one_common_value_and_rare_others_is_filtered_on() -> None:
    """Outcomes: mostly 'adopted', a few others once each; it is still a category (few values for
    its rows), unlike names written once per row."""
    animals = pd.DataFrame(
        {
            "name": [f"pet{i}" for i in range(12)],
            "outcome": ["adopted"] * 8 + ["fostered", "returned", "on hold", "transferred"],
        }
    )
    labels = [o.label for o in filters(animals, pd.DataFrame({"name": ["pet0"]}))]
    assert "outcome eq adopted" in labels and not any(label.startswith("name") for label in labels)


def test_dates_written_day_month_name_year_with_dashes_are_dates() -> None:
    facts = column_facts(pd.DataFrame({"Receipt Date": ["16-Nov-2026", "04-Nov-2026", "19-Oct-2026"]}))
    assert facts["Receipt Date"].kind == "date_text" and "%d-%b-%Y" in facts["Receipt Date"].date_formats


def test_everything_but_one_value_is_a_filter_on_a_status_not_on_a_day_or_a_customer() -> None:
    jobs = pd.DataFrame(
        {
            "day": [
                f"2026-11-{d:02d}" for d in (2, 2, 3, 4, 4, 5, 6, 9, 9, 10, 11, 12, 12, 13, 16, 17, 18, 18)
            ],
            "customer": ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C8", "C9"] * 2,
            "status": ["done", "done", "open", "done", "void", "done"] * 3,
        }
    )
    ops_on = {(o.steps[0].duty.column, o.steps[0].duty.op) for o in filters(jobs, pd.DataFrame({"x": [1]}))}
    assert ("status", "ne") in ops_on and ("customer", "eq") in ops_on
    assert ("day", "ne") not in ops_on and ("customer", "ne") not in ops_on


def test_a_list_sorted_by_name_is_sorted_by_that_name() -> None:
    """Outstanding fees, the pupils in alphabetical order (the export lists them by invoice)."""
    fees = pd.DataFrame(
        {
            "invoice": [f"F{i}" for i in range(1, 11)],
            "pupil": ["Molly", "Ava", "Liam", "Ella", "Zoe", "Cian", "Noah", "Grace", "Amy", "Finn"],
            "status": ["due", "due", "paid", "due", "paid", "due", "due", "due", "paid", "due"],
            "fee": [95.0, 120.0, 110.0, 130.0, 100.0, 130.0, 90.0, 160.0, 105.0, 140.0],
        }
    )
    wanted = fees[fees.status == "due"].sort_values("pupil")[["pupil", "fee"]].reset_index(drop=True)
    found = synthesise({"fees": fees}, wanted.head(5))
    assert found.spec is not None, found
    output = run_spec({"fees": fees}, found.spec).output.reset_index(drop=True)
    assert same_table(output, wanted)


def test_a_per_group_sum_equal_to_some_row_s_amount_does_not_screen_out_the_filter() -> None:
    """Paid amounts per region: region a's 30 and b's 60 are also the amounts of two unpaid
    rows of region c; the example rows are not rows of the table (no row is region a with 30),
    so their numbers are per-group values and the filter dropping those unpaid rows stays."""
    sales = pd.DataFrame(
        {
            "region": ["a", "a", "b", "b", "c", "c", "d", "d"],
            "status": ["paid", "paid", "paid", "paid", "unpaid", "unpaid", "paid", "unpaid"],
            "amount": [10.0, 20.0, 25.0, 35.0, 30.0, 60.0, 7.0, 4.0],
        }
    )
    paid = sales[sales.status == "paid"]
    wanted = paid.groupby("region", as_index=False)["amount"].sum()
    assert ("status", "eq", "paid") in {
        (o.steps[0].duty.column, o.steps[0].duty.op, o.steps[0].duty.value) for o in filters(sales, wanted)
    }
    found = synthesise({"sales": sales}, wanted)
    assert found.spec is not None, found
    assert same_table(run_spec({"sales": sales}, found.spec).output, wanted)


def test_dates_with_the_weekday_written_first_are_dates() -> None:
    facts = column_facts(pd.DataFrame({"Date": ["Sat 14/11/2026", "Mon 16/11/2026", "Thu 19/11/2026"]}))
    assert facts["Date"].kind == "date_text" and "%a %d/%m/%Y" in facts["Date"].date_formats
    duty = DeriveDuty(name="Date", op="date", left="Date", fmt="%a %d/%m/%Y")  # a valid spec
    frame, _ = ops.op_derive(
        pd.DataFrame({"Date": ["Sat 14/11/2026"]}), duty.name, duty.op, duty.left, None, "small", fmt=duty.fmt
    )
    assert frame["Date"].tolist() == ["2026-11-14"]


def test_a_repeated_bike_is_not_a_change_log_when_each_job_has_its_own_number() -> None:
    """Bikes come back to the workshop: their rows agree on the customer, as versions of one
    record would, but the output lists job numbers, which every row has its own; each job stays
    (one row per bike would fit the first rows as well: the repeats come later)."""
    jobs = pd.DataFrame(
        {
            "Job No": [f"BK-04{i:02d}" for i in range(12)],
            "Customer": ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "C1", "C3", "C2", "C8", "C9"],
            "Bike": [
                "Trek",
                "Giant",
                "Dawes",
                "Cube",
                "Frog",
                "Orbea",
                "Tern",
                "Trek",
                "Dawes",
                "Giant",
                "Marin",
                "Ribble",
            ],
            "Status": [
                "Ready",
                "Done",
                "Ready",
                "Ready",
                "Done",
                "Ready",
                "Ready",
                "Ready",
                "Ready",
                "Ready",
                "Done",
                "Ready",
            ],
            "Quote": [96.0, 48.5, 85.0, 14.0, 164.9, 45.0, 38.0, 59.0, 32.5, 20.0, 55.0, 129.0],
        }
    )
    wanted = jobs[jobs.Status == "Ready"][["Job No", "Customer", "Bike", "Quote"]].reset_index(drop=True)
    found = synthesise({"jobs": jobs}, wanted.head(5))
    assert found.spec is not None
    assert same_table(run_spec({"jobs": jobs}, found.spec).output, wanted)


def test_a_lookup_table_is_deduplicated_only_on_the_key_it_joins_on() -> None:
    """Two machines stand at the Lakeside site: the machine list repeats the site with the same
    address, as versions of one record would, but sales join on the machine; both machines' sales
    count for the site."""
    machines = pd.DataFrame(
        {
            "machineId": ["M1", "M2", "M3", "M4"],
            "siteName": ["Lakeside", "Lakeside", "Depot", "Library"],
            "address": ["1 Lake Rd", "1 Lake Rd", "2 Depot St", "3 High St"],
        }
    )
    sales = pd.DataFrame(
        {"machineId": ["M1", "M2", "M3", "M4", "M1", "M2", "M3", "M2"], "units": [3, 5, 2, 4, 1, 6, 2, 2]}
    )
    options = cleanings(machines, target_facts(pd.DataFrame({"siteName": ["Lakeside"]})), fact=sales)
    assert not any(step.role == Role.DEDUP for option in options for step in option.steps)
    wanted = sales.merge(machines, on="machineId").groupby("siteName", as_index=False)["units"].sum()
    found = synthesise({"sales": sales, "machines": machines}, wanted)
    assert found.spec is not None
    assert same_table(run_spec({"sales": sales, "machines": machines}, found.spec).output, wanted)


def test_a_program_that_cleans_only_a_table_it_never_joins_keeps_the_fact_table():
    """The output is a node, never a raw table, whatever the other tables' cleaning."""
    from orchestrl.envs.orchestration.spec import DedupDuty, Role
    from orchestrl.envs.orchestration.synthesis.proposer import Step
    from orchestrl.envs.orchestration.synthesis.search import Program

    spec = Program(("orders", "shops"), {"shops": (Step(Role.DEDUP, DedupDuty()),)}, (), 0.0, False).spec()
    output = spec.node(spec.output_id)
    assert tuple(output.deps) == ("orders",) and output.duty.is_base
