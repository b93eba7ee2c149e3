"""Recompute ``wanted.csv`` and ``target_example.csv`` for every fresh plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases were
held out until measured blind once (README), then used for tuning.

    python tests/data/plan_cases_seen_f/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_f/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def photocopier_mono_pages_november(t: Tables) -> pd.DataFrame:
    r = t["meter_reads"].copy()
    r["Mono Pages"] = num(r["Mono End"]) - num(r["Mono Start"])
    m = r.merge(t["leases"], on="Serial No")
    m = m[m["Billing"] == "Click charge"]
    return m.sort_values("Mono Pages", ascending=False)[["Serial No", "Customer", "Model", "Mono Pages"]]


def school_canteen_takings_by_year(t: Tables) -> pd.DataFrame:
    s = t["till"].drop_duplicates()
    s = s[s["Tender"] != "FSM"].copy()
    s["Price"] = num(s["Price"])
    m = s.merge(t["pupils"], on="CardNo")
    g = m.groupby("YearGroup", as_index=False).agg(Items=("TxnRef", "count"), Takings=("Price", "sum"))
    g["Takings"] = g["Takings"].round(2)
    g = g.rename(columns={"YearGroup": "Year Group"})
    return g[["Year Group", "Items", "Takings"]]


def food_truck_sales_by_location_category(t: Tables) -> pd.DataFrame:
    s = t["item_sales"].copy()
    s["Location"] = s["Location"].str.strip()
    s["Net Sales"] = num(s["Net Sales"])
    g = s.groupby(["Location", "Category"], as_index=False).agg(
        **{"Items Sold": ("Qty", "sum"), "Net Sales": ("Net Sales", "sum")}
    )
    g["Net Sales"] = g["Net Sales"].round(2)
    return g[["Location", "Category", "Items Sold", "Net Sales"]]


def scuba_deep_dives(t: Tables) -> pd.DataFrame:
    d = t["dive_log"]
    d = d[d["Max Depth (m)"] >= 30].copy()
    d["Date"] = iso_date(d["Date"], "%d/%m/%Y")
    d["O2 %"] = num(d["O2 %"])
    return d.sort_values("Date")[["Dive #", "Date", "Site", "Max Depth (m)", "Bottom Time (min)", "O2 %"]]


def tennis_court_minutes_by_court(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[b["status"] != "Cancelled"]
    m = b.merge(t["courts"], on="courtId")
    g = m.groupby("courtName", as_index=False).agg(
        minutesBooked=("durationMins", "sum"), members=("bookedBy", "nunique")
    )
    return g[["courtName", "minutesBooked", "members"]]


def chess_club_top5_current_ratings(t: Tables) -> pd.DataFrame:
    r = t["ratings"].drop_duplicates(subset=["ECF Code"], keep="first").copy()
    r["Std"] = num(r["Std"])
    r = r.dropna(subset=["Std"]).rename(columns={"Std": "Standard Rating"})
    r = r.sort_values("Standard Rating", ascending=False).head(5)
    return r[["Name", "ECF Code", "Standard Rating"]]


def window_cleaning_unpaid_by_round(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[j["paid"] == "No"].copy()
    j["price"] = num(j["price"])
    m = j.merge(t["customers"], on="customer_id")
    g = m.groupby("round", as_index=False).agg(unpaid_jobs=("job_id", "count"), owed=("price", "sum"))
    return g.sort_values("owed", ascending=False)[["round", "unpaid_jobs", "owed"]]


def taxi_top3_corporate_drivers(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[j["Status"] == "Completed"].copy()
    j["Fare"] = num(j["Fare"])
    m = j.merge(t["drivers"], on="Callsign").merge(t["accounts"], on="Account")
    m = m[m["Account Type"] == "Corporate"]
    g = m.groupby("Driver Name", as_index=False).agg(
        **{"Corporate Jobs": ("Job No", "count"), "Corporate Fares": ("Fare", "sum")}
    )
    g["Corporate Fares"] = g["Corporate Fares"].round(2)
    g = g.sort_values("Corporate Fares", ascending=False).head(3)
    return g[["Driver Name", "Corporate Jobs", "Corporate Fares"]]


def hair_salon_colour_by_stylist(t: Tables) -> pd.DataFrame:
    a = t["appointments"].drop_duplicates()
    a = a[a["status"] == "Completed"].copy()
    a["price"] = num(a["price"])
    m = a.merge(t["services"], on="serviceCode").merge(t["staff"], on="staffId")
    m = m[m["category"] == "Colour"]
    g = m.groupby("stylistName", as_index=False).agg(
        colourAppts=("apptRef", "count"), colourTakings=("price", "sum")
    )
    return g[["stylistName", "colourAppts", "colourTakings"]]


def scrap_yard_payouts_by_material(t: Tables) -> pd.DataFrame:
    k = t["tickets"]
    k = k[k["Status"] == "Complete"]
    m = k.merge(t["materials"], on="Mat Code")
    m["Payout"] = num(m["Net Wt (kg)"]) * num(m["Price/kg"])
    g = m.groupby("Material", as_index=False).agg(Tickets=("Tkt No", "count"), Payout=("Payout", "sum"))
    g["Payout"] = g["Payout"].round(2)
    return g.sort_values("Payout", ascending=False)[["Material", "Tickets", "Payout"]]


def home_care_missed_and_late_visits(t: Tables) -> pd.DataFrame:
    v = t["visits"]
    v = v[v["visit_status"].isin(["Missed", "Late"])].copy()
    v["visit_date"] = iso_date(v["visit_date"], "%d/%m/%y")
    v["carer"] = v["carer"].str.strip()
    m = v.merge(t["clients"], on="client_id", how="left")
    return m[["visit_id", "visit_date", "client_name", "area", "carer", "visit_status"]]


def ev_charging_fleet_energy_by_site(t: Tables) -> pd.DataFrame:
    s = t["sessions"].drop_duplicates().copy()
    s["energy_kwh"] = num(s["energy_kwh"])
    s = s.dropna(subset=["energy_kwh"])
    m = s.merge(t["rfid_tags"], on="rfid_tag").merge(t["chargers"], on="charger_id")
    m = m[m["tag_type"] == "Fleet"]
    g = m.groupby("site", as_index=False).agg(
        fleet_sessions=("session_id", "count"), avg_kwh=("energy_kwh", "mean")
    )
    g["avg_kwh"] = g["avg_kwh"].round(1)
    return g[["site", "fleet_sessions", "avg_kwh"]]


def auction_top5_lots(t: Tables) -> pd.DataFrame:
    lots = t["lots"]
    lots = lots[lots["Result"] == "Sold"].copy()
    lots["Hammer"] = num(lots["Hammer"])
    m = lots.merge(t["buyers"], on="Paddle")
    return m.sort_values("Hammer", ascending=False).head(5)[["Lot", "Description", "Hammer", "Buyer"]]


def gritting_heavy_salt_runs(t: Tables) -> pd.DataFrame:
    g = t["gritting_log"].copy()
    g["Salt (t)"] = num(g["Salt (t)"])
    g = g[g["Salt (t)"] > 6].copy()
    g["Date"] = iso_date(g["Date"], "%a %d/%m/%Y")
    return g.sort_values("Salt (t)", ascending=False)[["Date", "Route", "Gritter", "Driver", "Salt (t)"]]


def hackerspace_lapsed_members(t: Tables) -> pd.DataFrame:
    m = t["members"].copy()
    m["tier"] = m["tier"].str.strip().str.title()
    m["full_name"] = m["full_name"].str.strip()
    m = m[(m["status"] == "Lapsed") & m["tier"].isin(["Full", "Student"])].copy()
    m["monthly_dues"] = num(m["monthly_dues"])
    m["last_payment"] = iso_date(m["last_payment"], "%m/%d/%Y")
    return m.sort_values("full_name")[["full_name", "handle", "tier", "monthly_dues", "last_payment"]]


CASES: dict[str, CaseFn] = {
    "01_photocopier_mono_pages_november": photocopier_mono_pages_november,
    "02_school_canteen_takings_by_year": school_canteen_takings_by_year,
    "03_food_truck_sales_by_location_category": food_truck_sales_by_location_category,
    "04_scuba_deep_dives": scuba_deep_dives,
    "05_tennis_court_minutes_by_court": tennis_court_minutes_by_court,
    "06_chess_club_top5_current_ratings": chess_club_top5_current_ratings,
    "07_window_cleaning_unpaid_by_round": window_cleaning_unpaid_by_round,
    "08_taxi_top3_corporate_drivers": taxi_top3_corporate_drivers,
    "09_hair_salon_colour_by_stylist": hair_salon_colour_by_stylist,
    "10_scrap_yard_payouts_by_material": scrap_yard_payouts_by_material,
    "11_home_care_missed_and_late_visits": home_care_missed_and_late_visits,
    "12_ev_charging_fleet_energy_by_site": ev_charging_fleet_energy_by_site,
    "13_auction_top5_lots": auction_top5_lots,
    "14_gritting_heavy_salt_runs": gritting_heavy_salt_runs,
    "15_hackerspace_lapsed_members": hackerspace_lapsed_members,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
