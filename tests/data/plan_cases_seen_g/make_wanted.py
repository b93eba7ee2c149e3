"""Recompute ``wanted.csv`` and ``target_example.csv`` for every fresh plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases were
held out until measured blind once (README), then used for tuning.

    python tests/data/plan_cases_seen_g/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_g/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def bike_repair_ready_for_collection(t: Tables) -> pd.DataFrame:
    j = t["job_cards"]
    j = j[j["Status"] == "Ready for collection"].copy()
    j["Balance Due"] = (num(j["Quote Total"]) - num(j["Deposit"])).round(2)
    j["Booked In"] = iso_date(j["Booked In"], "%d/%m/%Y")
    m = j.merge(t["customers"], left_on="Customer Ref", right_on="CustRef")
    m = m.rename(columns={"Name": "Customer"}).sort_values("Booked In")
    return m[["Job No", "Booked In", "Customer", "Phone", "Bike", "Balance Due"]]


def cricket_top5_league_run_scorers(t: Tables) -> pd.DataFrame:
    b = t["batting"].drop_duplicates().copy()
    b = b[b["Comp"] == "League"].copy()
    b["Batter"] = b["Batter"].str.strip()
    b["R"] = num(b["R"])
    b = b.dropna(subset=["R"])
    g = b.groupby("Batter", as_index=False).agg(Runs=("R", "sum"), **{"High Score": ("R", "max")})
    g = g.sort_values("Runs", ascending=False).head(5)
    return g[["Batter", "Runs", "High Score"]]


def climbing_wall_problems_up_by_wall_circuit(t: Tables) -> pd.DataFrame:
    r = t["route_log"].copy()
    r["wall"] = r["wall"].str.strip().str.title()
    r = r[r["status"] == "Up"]
    g = r.groupby(["wall", "circuit"], as_index=False).agg(
        problemsUp=("routeId", "count"), setters=("setter", "nunique")
    )
    return g[["wall", "circuit", "problemsUp", "setters"]]


def pub_quiz_top3_teams(t: Tables) -> pd.DataFrame:
    s = t["scores"].drop_duplicates()
    m = s.merge(t["teams"], on="Team No")
    g = m.groupby("Team Name", as_index=False).agg(
        **{"Quiz Nights": ("Week", "count"), "Total Score": ("Score", "sum")}
    )
    g = g.sort_values("Total Score", ascending=False).head(3)
    return g[["Team Name", "Quiz Nights", "Total Score"]]


def yacht_race2_corrected_times(t: Tables) -> pd.DataFrame:
    r = t["results"]
    r = r[r["Race"] == "Race 2"].copy()
    r["Elapsed (s)"] = num(r["Elapsed (s)"])
    r = r.dropna(subset=["Elapsed (s)"])
    m = r.merge(t["boats"], on="Sail No")
    m["Corrected (s)"] = (m["Elapsed (s)"] * m["IRC TCC"]).round(1)
    m = m.sort_values("Corrected (s)")
    return m[["Sail No", "Boat Name", "Elapsed (s)", "IRC TCC", "Corrected (s)"]]


def farrier_fees_by_yard(t: Tables) -> pd.DataFrame:
    v = t["visits"].copy()
    v["fee"] = num(v["fee"])
    m = v.merge(t["horses"], on="horse_id").merge(t["yards"], on="yard_code")
    g = m.groupby("yard_name", as_index=False).agg(visits=("visit_id", "count"), fees=("fee", "sum"))
    g = g.sort_values("fees", ascending=False)
    return g[["yard_name", "visits", "fees"]]


def optician_orders_by_lens_type(t: Tables) -> pd.DataFrame:
    o = t["orders"]
    o = o[o["Status"] != "Cancelled"].copy()
    o["Disc %"] = num(o["Disc %"])
    m = o.merge(t["lenses"], on="Lens Code")
    g = m.groupby("Lens Type", as_index=False).agg(
        Orders=("Ord Ref", "count"), **{"Avg Disc %": ("Disc %", "mean")}
    )
    g["Avg Disc %"] = g["Avg Disc %"].round(2)
    return g[["Lens Type", "Orders", "Avg Disc %"]]


def removals_big_moves_by_crew_leader(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[(j["Status"] == "Completed") & (j["Vol (m3)"] >= 30)].copy()
    j["Quote Amt"] = num(j["Quote Amt"])
    m = j.merge(t["staff"], left_on="Lead ID", right_on="Staff ID")
    g = m.groupby("Name", as_index=False).agg(
        **{"Big Moves": ("Job Ref", "count"), "Revenue": ("Quote Amt", "sum")}
    )
    g["Revenue"] = g["Revenue"].round(2)
    g = g.rename(columns={"Name": "Crew Leader"}).sort_values("Revenue", ascending=False)
    return g[["Crew Leader", "Big Moves", "Revenue"]]


def pat_testing_latest_failures(t: Tables) -> pd.DataFrame:
    p = t["pat_log"].drop_duplicates(subset=["Asset ID"], keep="first").copy()
    p["Result"] = p["Result"].str.strip().str.title()
    p = p[p["Result"] == "Fail"].copy()
    p["Test Date"] = iso_date(p["Test Date"], "%d/%m/%Y")
    return p.sort_values("Asset ID")[["Asset ID", "Description", "Location", "Test Date"]]


def food_hygiene_ratings_by_business_type(t: Tables) -> pd.DataFrame:
    i = t["inspections"].drop_duplicates(subset=["FHRSID"], keep="first")
    i = i.dropna(subset=["RatingValue"])
    g = i.groupby("BusinessType", as_index=False).agg(
        Premises=("FHRSID", "count"), AvgRating=("RatingValue", "mean")
    )
    g["AvgRating"] = g["AvgRating"].round(2)
    g = g.sort_values("AvgRating")
    return g[["BusinessType", "Premises", "AvgRating"]]


def polling_verification_by_ward(t: Tables) -> pd.DataFrame:
    v = t["verification"]
    v = v[v["Election"] == "Borough"].copy()
    v["Ballot Papers"] = num(v["Ballot Papers"])
    m = v.merge(t["stations"], on="Station Code").merge(t["districts"], on="Polling District")
    g = m.groupby("Ward", as_index=False).agg(
        **{"Ballot Boxes": ("Ballot Box", "count"), "Ballot Papers": ("Ballot Papers", "sum")}
    )
    g = g.sort_values("Ward")
    return g[["Ward", "Ballot Boxes", "Ballot Papers"]]


def freezer_meals_to_use_first(t: Tables) -> pd.DataFrame:
    f = t["freezer"].copy()
    f["Type"] = f["Type"].str.strip().str.title()
    f = f[f["Type"].isin(["Meal", "Soup"]) & (f["Portions"] >= 2)].copy()
    f["Use By"] = iso_date(f["Use By"], "%d/%m/%y")
    return f.sort_values("Use By")[["Item", "Type", "Portions", "Use By"]]


def florist_sales_by_occasion_and_channel(t: Tables) -> pd.DataFrame:
    o = t["orders"]
    o = o[o["status"] == "Fulfilled"].copy()
    o["sales"] = o["qty"] * num(o["unitPrice"])
    m = o.merge(t["products"], on="sku")
    g = m.groupby(["occasion", "channel"], as_index=False).agg(
        orders=("orderNo", "count"), sales=("sales", "sum")
    )
    g["sales"] = g["sales"].round(2)
    return g[["occasion", "channel", "orders", "sales"]]


def tool_hire_top5_long_trade_hires(t: Tables) -> pd.DataFrame:
    h = t["hires"]
    h = h[h["Days"] > 7]
    m = h.merge(t["tools"], on="ToolCode").merge(t["customers"], left_on="AccountNo", right_on="Account No")
    m = m[m["Account Type"] == "Trade"].copy()
    m["Hire Charge"] = (m["Days"] * num(m["DayRate"])).round(2)
    m = m.sort_values("Hire Charge", ascending=False).head(5)
    return m[["HireRef", "Customer", "Tool", "Days", "Hire Charge"]]


def lifeguard_rescues_and_major_first_aid(t: Tables) -> pd.DataFrame:
    i = t["incidents"]
    i = i[i["incident_type"].isin(["Rescue", "Major first aid"])].copy()
    i["incident_date"] = iso_date(i["incident_date"], "%a %d/%m/%Y")
    i["lifeguard"] = i["lifeguard"].str.strip()
    m = i.merge(t["beaches"], on="beach_code", how="left")
    return m[["incident_ref", "incident_date", "beach_name", "incident_type", "lifeguard"]]


CASES: dict[str, CaseFn] = {
    "01_bike_repair_ready_for_collection": bike_repair_ready_for_collection,
    "02_cricket_top5_league_run_scorers": cricket_top5_league_run_scorers,
    "03_climbing_wall_problems_up_by_wall_circuit": climbing_wall_problems_up_by_wall_circuit,
    "04_pub_quiz_top3_teams": pub_quiz_top3_teams,
    "05_yacht_race2_corrected_times": yacht_race2_corrected_times,
    "06_farrier_fees_by_yard": farrier_fees_by_yard,
    "07_optician_orders_by_lens_type": optician_orders_by_lens_type,
    "08_removals_big_moves_by_crew_leader": removals_big_moves_by_crew_leader,
    "09_pat_testing_latest_failures": pat_testing_latest_failures,
    "10_food_hygiene_ratings_by_business_type": food_hygiene_ratings_by_business_type,
    "11_polling_verification_by_ward": polling_verification_by_ward,
    "12_freezer_meals_to_use_first": freezer_meals_to_use_first,
    "13_florist_sales_by_occasion_and_channel": florist_sales_by_occasion_and_channel,
    "14_tool_hire_top5_long_trade_hires": tool_hire_top5_long_trade_hires,
    "15_lifeguard_rescues_and_major_first_aid": lifeguard_rescues_and_major_first_aid,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
