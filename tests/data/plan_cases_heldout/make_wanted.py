"""Recompute ``wanted.csv`` and ``target_example.csv`` for every fresh plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases are fresh
and independent of the planner: they were written without looking at its code or its results, so keep
them out of any tuning of the planner.

    python tests/data/plan_cases_heldout/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_heldout/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def phone_repair_ready_for_collection(t: Tables) -> pd.DataFrame:
    r = t["repairs"]
    r = r[r["Status"] == "Ready for collection"].copy()
    r["Balance Due"] = num(r["Quote"]) - num(r["Deposit"])
    r["Booked In"] = iso_date(r["Booked In"], "%d/%m/%Y")
    m = r.merge(t["customers"], left_on="Cust No", right_on="Customer No")
    m = m.sort_values("Booked In")
    return m[["Job No", "Booked In", "Name", "Mobile", "Device", "Balance Due"]]


def ice_cream_van_top3_pitches(t: Tables) -> pd.DataFrame:
    s = t["sessions"].drop_duplicates()
    s = s[s["session_type"] != "Private hire"].copy()
    s["takings"] = num(s["cash_takings"]) + num(s["card_takings"])
    m = s.merge(t["pitches"], on="pitch_code")
    g = m.groupby("pitch_name", as_index=False).agg(
        sessions=("session_date", "count"), takings=("takings", "sum")
    )
    g["takings"] = g["takings"].round(2)
    return g.sort_values("takings", ascending=False).head(3)[["pitch_name", "sessions", "takings"]]


def coffee_roastery_roasted_kg_by_origin_level(t: Tables) -> pd.DataFrame:
    r = t["roast_log"].copy()
    r["Roasted (kg)"] = num(r["Roasted (kg)"])
    r = r.dropna(subset=["Roasted (kg)"])
    r["Roast Level"] = r["Lvl"].str.strip().str.title()
    g = r.groupby(["Origin", "Roast Level"], as_index=False).agg(
        Batches=("Batch", "count"), **{"Roasted (kg)": ("Roasted (kg)", "sum")}
    )
    g["Roasted (kg)"] = g["Roasted (kg)"].round(2)
    return g[["Origin", "Roast Level", "Batches", "Roasted (kg)"]]


def picture_framing_ready_orders(t: Tables) -> pd.DataFrame:
    o = t["orders"]
    o = o[o["Status"] == "Ready"]
    md = t["mouldings"].copy()
    md["Price/m"] = num(md["Price/m"])
    m = o.merge(md, on="Moulding").merge(t["customers"], on="Cust ID")
    m["Moulding Cost"] = (m["Moulding (m)"] * m["Price/m"]).round(2)
    return m[["Order No", "Customer", "Phone", "Artwork", "Description", "Moulding Cost"]]


def canoe_rental_long_rentals_by_craft(t: Tables) -> pd.DataFrame:
    r = t["rentals"]
    r = r[(r["status"] == "Returned") & (r["hours"] >= 2)].copy()
    r["paid"] = num(r["paid"])
    m = r.merge(t["fleet"], on="boat_no")
    g = m.groupby("craft_type", as_index=False).agg(rentals=("rental_id", "count"), revenue=("paid", "sum"))
    return g.sort_values("revenue", ascending=False)[["craft_type", "rentals", "revenue"]]


def mot_failures_without_retest(t: Tables) -> pd.DataFrame:
    x = t["mot_tests"]
    x = x[(x["Result"] == "FAIL") & (x["Retest Booked"] == "N")].copy()
    x["Test Date"] = iso_date(x["Test Date"], "%d.%m.%Y")
    x["Mileage"] = num(x["Mileage"])
    m = x.merge(t["vehicles"], left_on="Reg", right_on="Registration").sort_values("Owner")
    return m[["Owner", "Phone", "Reg", "Make", "Model", "Test Date", "Mileage"]]


def annual_leave_days_by_team(t: Tables) -> pd.DataFrame:
    r = t["leave_requests"].drop_duplicates(subset=["requestId"], keep="first")
    r = r[(r["leaveType"] == "Annual") & (r["status"] == "Approved")]
    m = r.merge(t["staff"], on="empId")
    g = m.groupby("team", as_index=False).agg(staffOnLeave=("empId", "nunique"), daysApproved=("days", "sum"))
    return g[["team", "staffOnLeave", "daysApproved"]]


def family_mobile_usage_by_member_month(t: Tables) -> pd.DataFrame:
    u = t["weekly_usage"].copy()
    u["Member"] = u["Member"].str.strip()
    u["Data (MB)"] = num(u["Data (MB)"])
    u["Extras"] = num(u["Extras"])
    g = u.groupby(["Member", "Bill Period"], as_index=False).agg(
        **{"Data (MB)": ("Data (MB)", "sum"), "Extras": ("Extras", "sum")}
    )
    g["Extras"] = g["Extras"].round(2)
    return g[["Member", "Bill Period", "Data (MB)", "Extras"]]


def home_renovation_spend_by_room_trade(t: Tables) -> pd.DataFrame:
    s = t["spend"].drop_duplicates()
    s = s[s["Type"] != "Quote"].copy()
    s["Room"] = s["Room"].str.strip().str.title()
    s["Amount"] = num(s["Amount"])
    m = s.merge(t["suppliers"], on="Supplier")
    g = m.groupby(["Room", "Trade"], as_index=False).agg(Spent=("Amount", "sum"))
    g["Spent"] = g["Spent"].round(2)
    return g[["Room", "Trade", "Spent"]]


def ambulance_cat2_response_by_station(t: Tables) -> pd.DataFrame:
    i = t["incidents"]
    i = i[i["Category"] == "C2"].copy()
    i["ResponseMins"] = num(i["ResponseMins"])
    i = i.dropna(subset=["ResponseMins"])
    m = i.merge(t["vehicles"], on="Callsign").merge(t["stations"], on="StationId")
    g = m.groupby("StationName", as_index=False).agg(
        C2Calls=("IncidentNo", "count"), MeanResponseMins=("ResponseMins", "mean")
    )
    g["MeanResponseMins"] = g["MeanResponseMins"].round(2)
    return g.sort_values("MeanResponseMins", ascending=False)[["StationName", "C2Calls", "MeanResponseMins"]]


def pothole_deep_open_reports(t: Tables) -> pd.DataFrame:
    r = t["reports"].copy()
    r["depth_mm"] = num(r["depth_mm"])
    r = r[r["status"].isin(["Open", "Scheduled"]) & (r["depth_mm"] >= 40)].copy()
    r["reported_on"] = iso_date(r["reported_on"], "%d %B %Y")
    m = r.merge(t["streets"], left_on="street_id", right_on="usrn", how="left")
    m = m.sort_values("depth_mm", ascending=False)
    return m[["report_ref", "reported_on", "street_name", "ward", "depth_mm", "status"]]


def bridge_club_top3_pairs(t: Tables) -> pd.DataFrame:
    r = t["results"].copy()
    r["score"] = num(r["score"])
    r = r.dropna(subset=["score"])
    m = r.merge(t["sessions"], on="sessionId").merge(t["pairs"], on="pairNo")
    m = m[m["sessionType"] == "Club Pairs"]
    g = m.groupby("players", as_index=False).agg(nights=("sessionId", "count"), avgScore=("score", "mean"))
    g["avgScore"] = g["avgScore"].round(2)
    return g.sort_values("avgScore", ascending=False).head(3)[["players", "nights", "avgScore"]]


def golf_top5_division1_stableford(t: Tables) -> pd.DataFrame:
    c = t["comp_entries"]
    c = c[(c["Competition"] == "November Stableford") & (c["Playing HCP"] <= 18)].copy()
    c["Points"] = num(c["Points"])
    c = c.dropna(subset=["Points"])
    return c.sort_values("Points", ascending=False).head(5)[["Player", "Playing HCP", "Points"]]


def geocaching_finds_by_cache_type(t: Tables) -> pd.DataFrame:
    f = t["my_logs"].drop_duplicates()
    f = f[f["Log Type"] == "Found it"].copy()
    f["Type"] = f["Type"].str.strip().str.title()
    g = f.groupby("Type", as_index=False).agg(Finds=("GC Code", "count"), **{"Avg Difficulty": ("D", "mean")})
    g["Avg Difficulty"] = g["Avg Difficulty"].round(2)
    return g.sort_values("Finds", ascending=False)[["Type", "Finds", "Avg Difficulty"]]


def yarn_stash_dk_for_jumper(t: Tables) -> pd.DataFrame:
    s = t["stash"].copy()
    s["Skeins"] = num(s["Skeins"])
    s = s[(s["Weight"] == "DK") & (s["Skeins"] >= 3)].copy()
    s["Brand"] = s["Brand"].str.strip()
    s["YarnName"] = s["YarnName"].str.strip()
    s["TotalMetres"] = s["Skeins"] * s["MetresPerSkein"]
    s = s.sort_values("TotalMetres", ascending=False)
    return s[["Brand", "YarnName", "Colourway", "Skeins", "TotalMetres"]]


CASES: dict[str, CaseFn] = {
    "01_phone_repair_ready_for_collection": phone_repair_ready_for_collection,
    "02_ice_cream_van_top3_pitches": ice_cream_van_top3_pitches,
    "03_coffee_roastery_roasted_kg_by_origin_level": coffee_roastery_roasted_kg_by_origin_level,
    "04_picture_framing_ready_orders": picture_framing_ready_orders,
    "05_canoe_rental_long_rentals_by_craft": canoe_rental_long_rentals_by_craft,
    "06_mot_failures_without_retest": mot_failures_without_retest,
    "07_annual_leave_days_by_team": annual_leave_days_by_team,
    "08_family_mobile_usage_by_member_month": family_mobile_usage_by_member_month,
    "09_home_renovation_spend_by_room_trade": home_renovation_spend_by_room_trade,
    "10_ambulance_cat2_response_by_station": ambulance_cat2_response_by_station,
    "11_pothole_deep_open_reports": pothole_deep_open_reports,
    "12_bridge_club_top3_pairs": bridge_club_top3_pairs,
    "13_golf_top5_division1_stableford": golf_top5_division1_stableford,
    "14_geocaching_finds_by_cache_type": geocaching_finds_by_cache_type,
    "15_yarn_stash_dk_for_jumper": yarn_stash_dk_for_jumper,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
