"""Recompute ``wanted.csv`` and ``target_example.csv`` for every held-out plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases are
held out: keep them out of any tuning of the planner.

    python tests/data/plan_cases_seen_d/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_d/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def parcel_lockers_awaiting_collection(t: Tables) -> pd.DataFrame:
    p = t["parcels"]
    p = p[p["status"] == "Awaiting collection"].copy()
    p["carrier"] = p["carrier"].str.strip()
    p["deposited"] = iso_date(p["deposited"], "%d/%m/%Y")
    m = p.merge(t["lockers"], on="locker_id")
    cols = ["parcel_id", "location", "compartment", "carrier", "deposited", "recipient_mobile"]
    return m.sort_values("deposited")[cols]


def farmers_market_pitch_fees_by_category(t: Tables) -> pd.DataFrame:
    b = t["pitch_bookings"].drop_duplicates()
    b = b[b["Paid"] == "Yes"].copy()
    b["Pitch Fee"] = num(b["Pitch Fee"])
    m = b.merge(t["traders"], on="Trader ID")
    g = m.groupby("Category", as_index=False).agg(
        **{"Fees Paid": ("Pitch Fee", "sum"), "Traders": ("Trader ID", "nunique")}
    )
    return g.sort_values("Fees Paid", ascending=False)[["Category", "Fees Paid", "Traders"]]


def ice_rink_occupancy_by_session_type(t: Tables) -> pd.DataFrame:
    s = t["sessions"].copy()
    s["Sess Type"] = s["Sess Type"].str.title()
    s["Occ %"] = num(s["Occ %"])
    s = s.dropna(subset=["Occ %"])
    g = s.groupby("Sess Type", as_index=False).agg(
        **{"Sessions": ("Date", "count"), "Avg Occ %": ("Occ %", "mean")}
    )
    g["Avg Occ %"] = g["Avg Occ %"].round(1)
    return g[["Sess Type", "Sessions", "Avg Occ %"]]


def board_game_cafe_top5_games(t: Tables) -> pd.DataFrame:
    c = t["checkouts"]
    c = c[c["minutesPlayed"] >= 10]
    m = c.merge(t["games"], on="gameId")
    g = m.groupby("title", as_index=False).agg(
        checkouts=("checkoutId", "count"), totalPlayers=("players", "sum")
    )
    return g.sort_values("checkouts", ascending=False).head(5)[["title", "checkouts", "totalPlayers"]]


def deductible_receipts_2026(t: Tables) -> pd.DataFrame:
    r = t["receipts"]
    r = r[r["Category"].isin(["Home Office", "Software", "Professional Development"])].copy()
    r["Date"] = iso_date(r["Receipt Date"], "%d-%b-%Y")
    r["Amount"] = num(r["Amount"])
    return r.sort_values("Date")[["Date", "Merchant", "Category", "Amount"]]


def orchard_harvest_by_variety(t: Tables) -> pd.DataFrame:
    h = t["harvest_log"]
    h = h[h["Grade"] != "Juice"].copy()
    h["Net Kg"] = num(h["Net Kg"])
    m = h.merge(t["blocks"], on="Block")
    g = m.groupby("Variety", as_index=False).agg(Bins=("Bins", "sum"), **{"Net Kg": ("Net Kg", "sum")})
    return g.sort_values("Net Kg", ascending=False)[["Variety", "Bins", "Net Kg"]]


def church_hall_hire_to_invoice(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[b["Invoice Status"] == "To invoice"]
    r = t["rooms"].copy()
    r["Hourly Rate"] = num(r["Hourly Rate"])
    m = b.merge(r, on="Room Code").merge(t["hirers"], on="Hirer ID")
    m["Charge"] = m["Hours"] * m["Hourly Rate"]
    return m[["Booking Ref", "Date", "Organisation", "Email", "Site", "Room", "Hours", "Charge"]]


def it_spare_laptops_in_stock(t: Tables) -> pd.DataFrame:
    a = t["asset_changes"].drop_duplicates(subset=["AssetTag"], keep="first")
    a = a[(a["DeviceType"] == "Laptop") & (a["Status"] == "In Stock")].copy()
    a["ChangedOn"] = iso_date(a["ChangedOn"], "%m/%d/%Y")
    return a[["AssetTag", "Model", "Location", "ChangedOn"]]


def print_shop_trade_revenue_by_category(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[j["status"].isin(["Collected", "Delivered"])]
    p = t["products"].copy()
    p["unit_price"] = num(p["unit_price"])
    m = j.merge(p, on="product_code").merge(t["customers"], on="cust_code")
    m = m[m["account_type"] == "Trade"].copy()
    m["value"] = m["qty"] * m["unit_price"]
    g = m.groupby("category", as_index=False).agg(jobs=("job_no", "count"), revenue=("value", "sum"))
    g["revenue"] = g["revenue"].round(2)
    return g.sort_values("revenue", ascending=False)[["category", "jobs", "revenue"]]


def recruitment_top3_consultants_q3(t: Tables) -> pd.DataFrame:
    p = t["placements"]
    p = p[p["Status"] == "Started"].copy()
    p["Fee"] = num(p["Fee"])
    m = p.merge(t["consultants"], on="Consultant ID")
    g = m.groupby("Name", as_index=False).agg(Placements=("Placement ID", "count"), Fees=("Fee", "sum"))
    g = g.rename(columns={"Name": "Consultant"})
    return g.sort_values("Fees", ascending=False).head(3)[["Consultant", "Placements", "Fees"]]


def bus_route_average_delay(t: Tables) -> pd.DataFrame:
    r = t["trip_log"].drop_duplicates().copy()
    r["delay_min"] = num(r["delay_min"])
    r = r.dropna(subset=["delay_min"])
    g = r.groupby("route", as_index=False).agg(
        trips=("trip_id", "count"), avg_delay_min=("delay_min", "mean")
    )
    g["avg_delay_min"] = g["avg_delay_min"].round(1)
    return g.sort_values("avg_delay_min", ascending=False)[["route", "trips", "avg_delay_min"]]


def translation_words_by_language_pair(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[j["Status"].isin(["Delivered", "Invoiced"])].copy()
    j["Target Lang"] = j["Target Lang"].str.strip()
    j["Words"] = num(j["Words"])
    g = j.groupby(["Source Lang", "Target Lang"], as_index=False).agg(
        Jobs=("Job No", "count"), Words=("Words", "sum")
    )
    return g[["Source Lang", "Target Lang", "Jobs", "Words"]]


def pottery_top3_glaze_members(t: Tables) -> pd.DataFrame:
    k = t["kiln_tickets"]
    k = k[k["outcome"] == "OK"]
    m = k.merge(t["firings"], on="firing_no").merge(t["members"], on="member_no")
    m = m[m["firing_type"] == "Glaze"]
    g = m.groupby("name", as_index=False).agg(
        pieces=("pieces", "sum"), glaze_firings=("firing_no", "nunique")
    )
    return g.sort_values("pieces", ascending=False).head(3)[["name", "pieces", "glaze_firings"]]


def charity_shop_takings_by_department(t: Tables) -> pd.DataFrame:
    s = t["till_export"].drop_duplicates().copy()
    s["Price"] = num(s["Price"])
    m = s.merge(t["departments"], on="Dept Code")
    g = m.groupby("Department", as_index=False).agg(Items=("Txn", "count"), Takings=("Price", "sum"))
    g["Takings"] = g["Takings"].round(2)
    return g[["Department", "Items", "Takings"]]


def astronomy_good_seeing_log(t: Tables) -> pd.DataFrame:
    o = t["observations"]
    o = o[o["Seeing (1-5)"] >= 4]
    m = o.merge(t["objects"], on="Object", how="left")
    cols = ["Date", "Object", "Common Name", "Type", "Constellation", "Mag"]
    return m.sort_values("Mag")[cols]


CASES: dict[str, CaseFn] = {
    "01_parcel_lockers_awaiting_collection": parcel_lockers_awaiting_collection,
    "02_farmers_market_pitch_fees_by_category": farmers_market_pitch_fees_by_category,
    "03_ice_rink_occupancy_by_session_type": ice_rink_occupancy_by_session_type,
    "04_board_game_cafe_top5_games": board_game_cafe_top5_games,
    "05_deductible_receipts_2026": deductible_receipts_2026,
    "06_orchard_harvest_by_variety": orchard_harvest_by_variety,
    "07_church_hall_hire_to_invoice": church_hall_hire_to_invoice,
    "08_it_spare_laptops_in_stock": it_spare_laptops_in_stock,
    "09_print_shop_trade_revenue_by_category": print_shop_trade_revenue_by_category,
    "10_recruitment_top3_consultants_q3": recruitment_top3_consultants_q3,
    "11_bus_route_average_delay": bus_route_average_delay,
    "12_translation_words_by_language_pair": translation_words_by_language_pair,
    "13_pottery_top3_glaze_members": pottery_top3_glaze_members,
    "14_charity_shop_takings_by_department": charity_shop_takings_by_department,
    "15_astronomy_good_seeing_log": astronomy_good_seeing_log,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
