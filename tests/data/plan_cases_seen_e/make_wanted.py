"""Recompute ``wanted.csv`` and ``target_example.csv`` for every fresh plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases are
held out: keep them out of any tuning of the planner.

    python tests/data/plan_cases_seen_e/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_e/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def marina_overdue_berth_invoices(t: Tables) -> pd.DataFrame:
    i = t["invoices"]
    i = i[i["Status"] == "Overdue"].copy()
    i["Outstanding"] = num(i["Amount"]) - num(i["Paid"])
    m = i.merge(t["boats"], on="Boat ID")
    m = m.sort_values("Outstanding", ascending=False)
    return m[["Invoice No", "Berth", "Boat Name", "Owner", "Outstanding"]]


def music_lessons_by_teacher(t: Tables) -> pd.DataFrame:
    les = t["lessons"]
    les = les[les["status"] == "Attended"]
    m = les.merge(t["teachers"], on="teacher_id")
    g = m.groupby("teacher_name", as_index=False).agg(
        Lessons=("lesson_id", "count"), Minutes=("length_min", "sum")
    )
    g = g.rename(columns={"teacher_name": "Teacher"})
    return g[["Teacher", "Lessons", "Minutes"]]


def call_centre_handle_time_by_team(t: Tables) -> pd.DataFrame:
    c = t["calls"].drop_duplicates()
    c = c[c["outcome"] == "Answered"].copy()
    c["handleSec"] = num(c["handleSec"])
    m = c.merge(t["agents"], on="agentId")
    g = m.groupby("team", as_index=False).agg(
        answeredCalls=("callId", "count"), avgHandleSec=("handleSec", "mean")
    )
    g["avgHandleSec"] = g["avgHandleSec"].round(1)
    return g[["team", "answeredCalls", "avgHandleSec"]]


def car_wash_revenue_by_package(t: Tables) -> pd.DataFrame:
    x = t["transactions"].drop_duplicates()
    x = x[x["Payment"] != "Fleet Account"].copy()
    x["Amount"] = num(x["Amount"])
    g = x.groupby("Package", as_index=False).agg(Washes=("Txn ID", "count"), Revenue=("Amount", "sum"))
    g["Revenue"] = g["Revenue"].round(2)
    return g.sort_values("Revenue", ascending=False)[["Package", "Washes", "Revenue"]]


def gas_meters_estimated_latest_reads(t: Tables) -> pd.DataFrame:
    r = t["meter_reads"].drop_duplicates(subset=["MPRN"], keep="first")
    r = r[r["Rdg Type"] == "E"].copy()
    r["Rdg Date"] = iso_date(r["Rdg Date"], "%d-%b-%Y")
    r["Reading"] = num(r["Reading"])
    return r.sort_values("Rdg Date")[["MPRN", "Supply Address", "Rdg Date", "Reading"]]


def greenhouse_climate_by_house(t: Tables) -> pd.DataFrame:
    s = t["sensor_log"].copy()
    s["rh"] = num(s["rh"])
    s = s.dropna(subset=["rh"])
    g = s.groupby("greenhouse", as_index=False).agg(avg_temp_c=("temp_c", "mean"), max_rh=("rh", "max"))
    g["avg_temp_c"] = g["avg_temp_c"].round(1)
    return g[["greenhouse", "avg_temp_c", "max_rh"]]


def hospital_ward_occupancy(t: Tables) -> pd.DataFrame:
    c = t["bed_census"].copy()
    c["Occ%"] = num(c["Occ%"])
    c = c.dropna(subset=["Occ%"])
    g = c.groupby(["Site", "Ward"], as_index=False).agg(
        **{"Avg Occ %": ("Occ%", "mean"), "Peak Occ Beds": ("OccBeds", "max")}
    )
    g["Avg Occ %"] = g["Avg Occ %"].round(1)
    return g[["Site", "Ward", "Avg Occ %", "Peak Occ Beds"]]


def kennel_revenue_by_dog_size(t: Tables) -> pd.DataFrame:
    s = t["stays"]
    s = s[s["status"] == "Completed"]
    k = t["kennels"].copy()
    k["nightly_rate"] = num(k["nightly_rate"])
    m = s.merge(t["dogs"], on="dog_id").merge(k, on="kennel_no")
    m["revenue"] = m["nights"] * m["nightly_rate"]
    g = m.groupby("size", as_index=False).agg(stays=("stay_id", "count"), revenue=("revenue", "sum"))
    return g.sort_values("revenue", ascending=False)[["size", "stays", "revenue"]]


def hardware_refunds_by_store_dept(t: Tables) -> pd.DataFrame:
    r = t["returns"].drop_duplicates()
    r = r[r["Reason"] != "Exchange"].copy()
    r["Refund"] = num(r["Refund"])
    m = r.merge(t["products"], on="SKU").merge(t["stores"], on="Store")
    g = m.groupby(["Store Name", "Department"], as_index=False).agg(
        Returns=("Return ID", "count"), Refunded=("Refund", "sum")
    )
    g["Refunded"] = g["Refunded"].round(2)
    return g[["Store Name", "Department", "Returns", "Refunded"]]


def student_housing_urgent_repairs(t: Tables) -> pd.DataFrame:
    r = t["repair_requests"]
    r = r[r["Priority"].isin(["Urgent", "High"]) & (r["Status"] != "Completed")].copy()
    r["Category"] = r["Category"].str.strip().str.title()
    r["Reported"] = iso_date(r["Reported"], "%d-%m-%Y")
    return r.sort_values("Reported")[["Ticket", "Residence", "Room", "Category", "Priority", "Reported"]]


def dance_school_outstanding_fees(t: Tables) -> pd.DataFrame:
    f = t["fees"]
    f = f[(f["Term"] == "Autumn 2026") & (f["Fee Status"] == "Outstanding")].copy()
    f["Fee"] = num(f["Fee"])
    p = t["pupils"].copy()
    p["Pupil Name"] = p["Pupil Name"].str.strip()
    m = f.merge(p, on="Pupil ID")
    return m.sort_values("Pupil Name")[["Pupil Name", "Class", "Fee", "Parent/Guardian", "Mobile"]]


def pest_control_follow_ups(t: Tables) -> pd.DataFrame:
    v = t["visits"]
    v = v[v["Follow-up"] == "Yes"].copy()
    v["Visit Date"] = iso_date(v["Visit Date"], "%d %b %Y")
    v["Pest"] = v["Pest"].str.strip()
    v["Technician"] = v["Technician"].str.strip()
    m = v.merge(t["clients"], on="Account", how="left")
    return m[["Visit #", "Visit Date", "Business Name", "Phone", "Pest", "Technician"]]


def photo_studio_top3_photographers(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[b["status"] == "Completed"].copy()
    b["fee"] = num(b["fee"])
    m = b.merge(t["photographers"], on="photographerId")
    g = m.groupby("fullName", as_index=False).agg(shoots=("bookingId", "count"), totalFees=("fee", "sum"))
    return g.sort_values("totalFees", ascending=False).head(3)[["fullName", "shoots", "totalFees"]]


def driving_school_top3_manual_instructors(t: Tables) -> pd.DataFrame:
    m = t["lessons"].merge(t["pupils"], on="PupilId").merge(t["instructors"], on="InstructorId")
    m = m[m["Transmission"] == "Manual"]
    g = m.groupby("InstructorName", as_index=False).agg(
        ManualHours=("Hours", "sum"), Pupils=("PupilId", "nunique")
    )
    g = g.sort_values("ManualHours", ascending=False).head(3)
    return g[["InstructorName", "ManualHours", "Pupils"]]


def cycling_club_top5_riders(t: Tables) -> pd.DataFrame:
    r = t["rides"]
    r = r[r["ride_type"] == "Club run"].copy()
    r["distance_km"] = num(r["distance_km"])
    r = r.dropna(subset=["distance_km"])
    m = r.merge(t["riders"], on="rider_id")
    g = m.groupby("name", as_index=False).agg(
        club_runs=("ride_date", "count"), total_km=("distance_km", "sum")
    )
    g["total_km"] = g["total_km"].round(1)
    return g.sort_values("total_km", ascending=False).head(5)[["name", "club_runs", "total_km"]]


CASES: dict[str, CaseFn] = {
    "01_marina_overdue_berth_invoices": marina_overdue_berth_invoices,
    "02_music_lessons_by_teacher": music_lessons_by_teacher,
    "03_call_centre_handle_time_by_team": call_centre_handle_time_by_team,
    "04_car_wash_revenue_by_package": car_wash_revenue_by_package,
    "05_gas_meters_estimated_latest_reads": gas_meters_estimated_latest_reads,
    "06_greenhouse_climate_by_house": greenhouse_climate_by_house,
    "07_hospital_ward_occupancy": hospital_ward_occupancy,
    "08_kennel_revenue_by_dog_size": kennel_revenue_by_dog_size,
    "09_hardware_refunds_by_store_dept": hardware_refunds_by_store_dept,
    "10_student_housing_urgent_repairs": student_housing_urgent_repairs,
    "11_dance_school_outstanding_fees": dance_school_outstanding_fees,
    "12_pest_control_follow_ups": pest_control_follow_ups,
    "13_photo_studio_top3_photographers": photo_studio_top3_photographers,
    "14_driving_school_top3_manual_instructors": driving_school_top3_manual_instructors,
    "15_cycling_club_top5_riders": cycling_club_top5_riders,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
