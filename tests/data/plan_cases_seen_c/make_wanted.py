"""Recompute ``wanted.csv`` and ``target_example.csv`` for every held-out plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases are
held out: keep them out of any tuning of the planner.

    python tests/data/plan_cases_seen_c/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_c/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def wine_cellar_low_reds(t: Tables) -> pd.DataFrame:
    c = t["cellar"].copy()
    c["ABV"] = num(c["ABV"])
    c = c[(c["Type"] == "Red") & (c["Bottles"] <= 3)]
    return c[["Bin", "Wine", "Producer", "Vintage", "ABV", "Bottles"]]


def bird_count_by_species(t: Tables) -> pd.DataFrame:
    o = t["observations"].copy()
    o["count"] = num(o["count"])
    o = o.dropna(subset=["count"])
    m = o.merge(t["species"], on="species_code")
    g = m.groupby("common_name", as_index=False).agg(
        birds=("count", "sum"), transects=("transect", "nunique")
    )
    g = g.rename(columns={"common_name": "Species", "birds": "Birds", "transects": "Transects"})
    return g.sort_values("Birds", ascending=False)[["Species", "Birds", "Transects"]]


def hives_without_queen(t: Tables) -> pd.DataFrame:
    i = t["inspections"].drop_duplicates(subset=["Hive"], keep="first")
    i = i[i["Queen Seen"] == "No"].copy()
    i["Inspected"] = iso_date(i["Inspected"], "%d.%m.%Y")
    return i[["Hive", "Apiary", "Inspected", "Brood Frames"]]


def garden_plot_balances(t: Tables) -> pd.DataFrame:
    p = t["plots"].copy()
    p = p[p["Fee Status"].isin(["Unpaid", "Part paid"])].copy()
    p["Balance"] = num(p["Annual Fee"]) - num(p["Paid to Date"])
    m = p.merge(t["gardeners"], on="Holder ID")
    return m[["Plot", "Site", "Name", "Email", "Balance"]]


def grooming_revenue_by_groomer(t: Tables) -> pd.DataFrame:
    a = t["appointments"]
    a = a[a["status"] == "Completed"]
    s = t["services"].copy()
    s["price"] = num(s["price"])
    m = a.merge(s, on="serviceCode").merge(t["groomers"], on="groomerId")
    g = m.groupby("groomerName", as_index=False).agg(
        appointments=("apptId", "count"), revenue=("price", "sum")
    )
    return g.sort_values("revenue", ascending=False)[["groomerName", "appointments", "revenue"]]


def escape_room_top3_rooms(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[b["Status"] != "Cancelled"]
    m = b.merge(t["rooms"], on="Room ID")
    g = m.groupby("Room Name", as_index=False).agg(Games=("Booking Ref", "count"), Players=("Players", "sum"))
    return g.sort_values("Players", ascending=False).head(3)[["Room Name", "Games", "Players"]]


def tree_planting_by_species(t: Tables) -> pd.DataFrame:
    p = t["planting_log"].copy()
    p["Species"] = p["Species"].str.strip().str.title()
    p["Trees Planted"] = num(p["Trees Planted"])
    p = p.dropna(subset=["Trees Planted"])
    g = p.groupby("Species", as_index=False).agg(
        **{"Trees Planted": ("Trees Planted", "sum"), "Sites": ("Site", "nunique")}
    )
    return g[["Species", "Trees Planted", "Sites"]]


def bakery_wholesale_by_customer(t: Tables) -> pd.DataFrame:
    o = t["order_lines"]
    o = o[o["qty"] > 0]
    p = t["products"].copy()
    p["wholesale_price"] = num(p["wholesale_price"])
    m = o.merge(p, on="sku").merge(t["customers"], on="cust_id")
    m["value"] = m["qty"] * m["wholesale_price"]
    g = m.groupby("business_name", as_index=False).agg(orders=("order_no", "nunique"), value=("value", "sum"))
    g["value"] = g["value"].round(2)
    return g.sort_values("value", ascending=False)[["business_name", "orders", "value"]]


def step_challenge_averages(t: Tables) -> pd.DataFrame:
    d = t["daily_activity"].copy()
    d["steps"] = num(d["steps"])
    d = d.dropna(subset=["steps"])
    g = d.groupby("userName", as_index=False).agg(daysLogged=("date", "count"), avgSteps=("steps", "mean"))
    g["avgSteps"] = g["avgSteps"].round(0)
    return g[["userName", "daysLogged", "avgSteps"]]


def radio_top5_tracks(t: Tables) -> pd.DataFrame:
    p = t["airplay_log"].drop_duplicates()
    p = p[p["SecondsPlayed"] >= 60]
    m = p.merge(t["tracks"], on="TrackID")
    g = m.groupby(["Title", "Artist"], as_index=False).agg(
        Plays=("PlayID", "count"), Shows=("Show", "nunique")
    )
    return g.sort_values("Plays", ascending=False).head(5)[["Title", "Artist", "Plays", "Shows"]]


def ferry_car_bookings_craignure(t: Tables) -> pd.DataFrame:
    b = t["bookings"].copy()
    b["Lead Passenger"] = b["Lead Passenger"].str.strip()
    b = b[(b["Status"] == "Confirmed") & (b["Vehicle"] == "Car")]
    m = b.merge(t["sailings"], on="Sailing Code")
    m = m[m["Route"] == "Oban - Craignure"].copy()
    m["Sail Date"] = iso_date(m["Sail Date"], "%d/%m/%Y")
    return m[["Booking No", "Lead Passenger", "Vehicle Reg", "Sail Date", "Depart"]]


def blood_drive_donations_by_venue(t: Tables) -> pd.DataFrame:
    d = t["donations"].drop_duplicates()
    d = d[d["outcome"] == "Donated"]
    m = d.merge(t["drives"], on="drv")
    g = m.groupby(["town", "venue"], as_index=False).agg(
        donations=("donor_id", "count"), total_ml=("vol_ml", "sum")
    )
    return g[["town", "venue", "donations", "total_ml"]]


def vinyl_top3_labels(t: Tables) -> pd.DataFrame:
    s = t["sales"].copy()
    s["Price Paid"] = num(s["Price Paid"])
    s = s[s["Type"] == "Sale"].copy()
    s["Takings"] = s["Qty"] * s["Price Paid"]
    m = s.merge(t["records"], on="SKU").merge(t["labels"], on="Label ID")
    g = m.groupby("Label", as_index=False).agg(Copies=("Qty", "sum"), Takings=("Takings", "sum"))
    g["Takings"] = g["Takings"].round(2)
    return g.sort_values("Takings", ascending=False).head(3)[["Label", "Copies", "Takings"]]


def newsletter_active_by_country_plan(t: Tables) -> pd.DataFrame:
    s = t["subscribers"].drop_duplicates(subset=["subscriber_id"], keep="first")
    s = s[s["status"] == "active"]
    g = s.groupby(["country", "plan"], as_index=False).agg(active_subscribers=("subscriber_id", "count"))
    return g[["country", "plan", "active_subscribers"]]


def dry_cleaning_ready_for_pickup(t: Tables) -> pd.DataFrame:
    k = t["tickets"]
    k = k[k["Status"] == "Ready"].copy()
    k["Dropped Off"] = iso_date(k["Dropped Off"], "%b %d, %Y")
    k["Total"] = num(k["Total"])
    m = k.merge(t["customers"], on="Customer ID", how="left")
    return m.sort_values("Dropped Off")[["Ticket #", "Name", "Phone", "Dropped Off", "Total"]]


CASES: dict[str, CaseFn] = {
    "01_wine_cellar_low_reds": wine_cellar_low_reds,
    "02_bird_count_by_species": bird_count_by_species,
    "03_hives_without_queen": hives_without_queen,
    "04_garden_plot_balances": garden_plot_balances,
    "05_grooming_revenue_by_groomer": grooming_revenue_by_groomer,
    "06_escape_room_top3_rooms": escape_room_top3_rooms,
    "07_tree_planting_by_species": tree_planting_by_species,
    "08_bakery_wholesale_by_customer": bakery_wholesale_by_customer,
    "09_step_challenge_averages": step_challenge_averages,
    "10_radio_top5_tracks": radio_top5_tracks,
    "11_ferry_car_bookings_craignure": ferry_car_bookings_craignure,
    "12_blood_drive_donations_by_venue": blood_drive_donations_by_venue,
    "13_vinyl_top3_labels": vinyl_top3_labels,
    "14_newsletter_active_by_country_plan": newsletter_active_by_country_plan,
    "15_dry_cleaning_ready_for_pickup": dry_cleaning_ready_for_pickup,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
