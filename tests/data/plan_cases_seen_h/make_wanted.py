"""Recompute ``wanted.csv`` and ``target_example.csv`` for every fresh plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases were
held out until measured blind once (README), then used for tuning.

    python tests/data/plan_cases_seen_h/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_h/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def locksmith_invoiced_lockouts(t: Tables) -> pd.DataFrame:
    j = t["jobs"]
    j = j[(j["Job Type"] == "Lockout") & (j["Status"] == "Invoiced")].copy()
    j["Charged"] = (num(j["Labour"]) + num(j["Parts"])).round(2)
    j["Date"] = iso_date(j["Date"], "%d/%m/%Y")
    c = t["customers"].copy()
    c["Customer Name"] = c["Customer Name"].str.strip()
    m = j.merge(c, left_on="Acct", right_on="Account").sort_values("Date")
    m = m.rename(columns={"Customer Name": "Customer"})
    return m[["Job Ref", "Date", "Customer", "Phone", "Address", "Charged"]]


def campsite_longer_stays_by_pitch_type(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[(b["status"] != "Cancelled") & (b["nights"] >= 3)].copy()
    b["total_paid"] = num(b["total_paid"])
    m = b.merge(t["pitches"], on="pitch_no")
    g = m.groupby("pitch_type", as_index=False).agg(
        bookings=("booking_ref", "count"), takings=("total_paid", "sum")
    )
    return g.sort_values("takings", ascending=False)[["pitch_type", "bookings", "takings"]]


def vending_sales_by_site_and_category(t: Tables) -> pd.DataFrame:
    s = t["vend_sales"].drop_duplicates()
    p = t["products"].copy()
    p["price"] = num(p["price"])
    m = s.merge(t["machines"], on="machineId").merge(p, on="sku")
    m["salesDollars"] = m["unitsSold"] * m["price"]
    g = m.groupby(["siteName", "category"], as_index=False).agg(
        unitsSold=("unitsSold", "sum"), salesDollars=("salesDollars", "sum")
    )
    g["salesDollars"] = g["salesDollars"].round(2)
    return g[["siteName", "category", "unitsSold", "salesDollars"]]


def chimney_sweep_poor_flues(t: Tables) -> pd.DataFrame:
    s = t["sweeps"]
    s = s[s["Flue Condition"].isin(["Poor", "Unsafe"])].copy()
    s["Sweep Date"] = iso_date(s["Sweep Date"], "%d %b %Y")
    m = s.merge(t["customers"], on="Customer ID", how="left")
    return m[["Cert No", "Sweep Date", "Name", "Phone", "Appliance", "Flue Condition"]]


def tattoo_studio_takings_by_artist(t: Tables) -> pd.DataFrame:
    a = t["appointments"].drop_duplicates()
    a = a[a["Status"] == "Completed"].copy()
    a["Artist"] = a["Artist"].str.strip().str.title()
    a["Price"] = num(a["Price"])
    g = a.groupby("Artist", as_index=False).agg(Sessions=("Appt ID", "count"), Takings=("Price", "sum"))
    return g[["Artist", "Sessions", "Takings"]]


def nursery_attendance_by_room_session(t: Tables) -> pd.DataFrame:
    r = t["registers"].copy()
    r["Attended"] = num(r["Attended"])
    r = r.dropna(subset=["Attended"])
    g = r.groupby(["Room", "Sess"], as_index=False).agg(
        **{"Avg Attended": ("Attended", "mean"), "Lowest Headcount": ("Attended", "min")}
    )
    g["Avg Attended"] = g["Avg Attended"].round(1)
    return g[["Room", "Sess", "Avg Attended", "Lowest Headcount"]]


def swim_club_top5_50_free(t: Tables) -> pd.DataFrame:
    s = t["swims"]
    s = s[s["event"] == "50 Free"].dropna(subset=["final_time"])
    m = s.merge(t["swimmers"], on="swimmer_id")
    m = m[m["age_group"] == "11-12"].copy()
    m["meet_date"] = iso_date(m["meet_date"], "%m/%d/%Y")
    m = m.sort_values("final_time").head(5)
    return m[["swimmer", "meet", "meet_date", "final_time"]]


def egg_farm_lay_by_house(t: Tables) -> pd.DataFrame:
    d = t["daily_lay"].copy()
    d["Eggs"] = num(d["Eggs"])
    d["Lay %"] = num(d["Lay %"])
    d = d.dropna(subset=["Eggs"])
    g = d.groupby("House", as_index=False).agg(
        **{"Total Eggs": ("Eggs", "sum"), "Avg Lay %": ("Lay %", "mean")}
    )
    g["Avg Lay %"] = g["Avg Lay %"].round(1)
    return g.sort_values("Total Eggs", ascending=False)[["House", "Total Eggs", "Avg Lay %"]]


def choir_subs_owed(t: Tables) -> pd.DataFrame:
    s = t["subs"]
    s = s[(s["Term"] == "Autumn 2026") & (s["Status"] != "Paid")].copy()
    s["Outstanding"] = num(s["Sub Due"]) - num(s["Paid"])
    mem = t["members"].copy()
    mem["Name"] = mem["Name"].str.strip()
    m = s.merge(mem, on="Member No").sort_values("Name")
    return m[["Name", "Voice Part", "Outstanding"]]


def street_light_open_faults(t: Tables) -> pd.DataFrame:
    f = t["fault_log"].drop_duplicates(subset=["Fault Ref"], keep="first")
    f = f[f["Status"] != "Repaired"].copy()
    f["Reported"] = iso_date(f["Reported"], "%a %d/%m/%Y")
    return f.sort_values("Reported")[["Fault Ref", "Street", "Fault", "Reported", "Status"]]


def pocket_money_by_child(t: Tables) -> pd.DataFrame:
    log = t["chore_log"].drop_duplicates()
    log = log[log["approved"] == "Y"].copy()
    log["childName"] = log["childName"].str.strip().str.title()
    c = t["chores"].copy()
    c["rate"] = num(c["rate"])
    m = log.merge(c, on="choreId")
    g = m.groupby("childName", as_index=False).agg(choresDone=("choreId", "count"), earned=("rate", "sum"))
    g["earned"] = g["earned"].round(2)
    return g.sort_values("earned", ascending=False)[["childName", "choresDone", "earned"]]


def ham_radio_top3_countries_20m(t: Tables) -> pd.DataFrame:
    q = t["qso_log"]
    q = q[q["BAND"] == "20m"].copy()
    q["COUNTRY"] = q["COUNTRY"].str.strip().str.title()
    g = q.groupby("COUNTRY", as_index=False).agg(Stations=("CALL", "nunique"), QSOs=("CALL", "count"))
    g = g.rename(columns={"COUNTRY": "Country"})
    return g.sort_values("Stations", ascending=False).head(3)[["Country", "Stations", "QSOs"]]


def self_storage_arrears(t: Tables) -> pd.DataFrame:
    b = t["balances"].copy()
    b["BalanceDue"] = num(b["BalanceDue"])
    b = b[b["BalanceDue"] >= 100].copy()
    b["LastPaymentDate"] = iso_date(b["LastPaymentDate"], "%d/%m/%y")
    m = b.merge(t["units"], on="UnitNo").merge(t["tenants"], left_on="TenantRef", right_on="CustomerRef")
    m = m.sort_values("BalanceDue", ascending=False)
    return m[["UnitNo", "Size", "FullName", "Mobile", "BalanceDue", "LastPaymentDate"]]


def archery_top3_recurve_portsmouth(t: Tables) -> pd.DataFrame:
    s = t["scores"]
    s = s[s["round"] == "Portsmouth"].copy()
    s["score"] = num(s["score"])
    s = s.dropna(subset=["score"])
    m = s.merge(t["archers"], on="agbNo")
    m = m[m["bowStyle"] == "Recurve"]
    g = m.groupby("archerName", as_index=False).agg(avgScore=("score", "mean"), bestScore=("score", "max"))
    g["avgScore"] = g["avgScore"].round(1)
    return g.sort_values("avgScore", ascending=False).head(3)[["archerName", "avgScore", "bestScore"]]


def bowling_group_bookings_by_zone_type(t: Tables) -> pd.DataFrame:
    b = t["lane_bookings"].drop_duplicates()
    b = b[b["Players"] > 6].copy()
    b["Amount"] = num(b["Amount"])
    m = b.merge(t["lanes"], on="Lane").merge(t["packages"], on="Pkg Code")
    g = m.groupby(["Zone", "Package Type"], as_index=False).agg(
        Bookings=("Booking #", "count"), Revenue=("Amount", "sum")
    )
    g["Revenue"] = g["Revenue"].round(2)
    return g[["Zone", "Package Type", "Bookings", "Revenue"]]


CASES: dict[str, CaseFn] = {
    "01_locksmith_invoiced_lockouts": locksmith_invoiced_lockouts,
    "02_campsite_longer_stays_by_pitch_type": campsite_longer_stays_by_pitch_type,
    "03_vending_sales_by_site_and_category": vending_sales_by_site_and_category,
    "04_chimney_sweep_poor_flues": chimney_sweep_poor_flues,
    "05_tattoo_studio_takings_by_artist": tattoo_studio_takings_by_artist,
    "06_nursery_attendance_by_room_session": nursery_attendance_by_room_session,
    "07_swim_club_top5_50_free": swim_club_top5_50_free,
    "08_egg_farm_lay_by_house": egg_farm_lay_by_house,
    "09_choir_subs_owed": choir_subs_owed,
    "10_street_light_open_faults": street_light_open_faults,
    "11_pocket_money_by_child": pocket_money_by_child,
    "12_ham_radio_top3_countries_20m": ham_radio_top3_countries_20m,
    "13_self_storage_arrears": self_storage_arrears,
    "14_archery_top3_recurve_portsmouth": archery_top3_recurve_portsmouth,
    "15_bowling_group_bookings_by_zone_type": bowling_group_bookings_by_zone_type,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
