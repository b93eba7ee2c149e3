"""Recompute ``wanted.csv`` and ``target_example.csv`` for every held-out plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows. These 15 cases are
held out: keep them out of any tuning of the planner.

    python tests/data/plan_cases_seen_b/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases_seen_b/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def loyalty_miles_by_tier(t: Tables) -> pd.DataFrame:
    a = t["miles_activity"].copy()
    a["miles"] = num(a["miles"])
    a = a[a["status"] == "Posted"]
    m = a.merge(t["members"], left_on="member_id", right_on="Member #")
    g = m.groupby("Tier", as_index=False).agg(members=("member_id", "nunique"), total_miles=("miles", "sum"))
    return g[["Tier", "members", "total_miles"]]


def dental_late_cancellations(t: Tables) -> pd.DataFrame:
    a = t["appointments"].copy()
    a["Patient"] = a["Patient"].str.strip()
    a = a[a["Status"] == "Late Cancel"].copy()
    a["Appointment Date"] = iso_date(a["Date"], "%d/%m/%Y")
    return a[["Appt No", "Patient", "Appointment Date", "Dentist"]]


def solar_output_by_site(t: Tables) -> pd.DataFrame:
    d = t["daily_output"].drop_duplicates().dropna(subset=["generated_kwh"])
    m = d.merge(t["sites"], on="site_id")
    g = m.groupby("site_name", as_index=False).agg(
        days_reported=("reading_date", "count"), total_kwh=("generated_kwh", "sum")
    )
    g["total_kwh"] = g["total_kwh"].round(1)
    return g.sort_values("total_kwh", ascending=False)[["site_name", "days_reported", "total_kwh"]]


def wedding_vendor_balances(t: Tables) -> pd.DataFrame:
    b = t["vendor_bookings"].copy()
    b["Contract Total"] = num(b["Contract Total"])
    b["Deposit Paid"] = num(b["Deposit Paid"])
    b = b[b["Status"] == "Booked"].copy()
    b["Balance"] = b["Contract Total"] - b["Deposit Paid"]
    b["Balance Due Date"] = iso_date(b["Balance Due Date"], "%b %d, %Y")
    m = b.merge(t["vendor_contacts"], on="Vendor", how="left")
    return m.sort_values("Balance Due Date")[["Vendor", "Service", "Balance", "Balance Due Date", "Phone"]]


def language_school_exam_averages(t: Tables) -> pd.DataFrame:
    r = t["exam_results"].copy()
    r["final_exam"] = num(r["final_exam"])
    r = r[r["term"] == "Spring 2026"].dropna(subset=["final_exam"])
    g = r.groupby(["campus", "course_level"], as_index=False).agg(
        Students=("student_id", "count"), avg=("final_exam", "mean")
    )
    g["avg"] = g["avg"].round(1)
    g = g.rename(columns={"campus": "Campus", "course_level": "Level", "avg": "Avg Exam %"})
    return g[["Campus", "Level", "Students", "Avg Exam %"]]


def coworking_meeting_room_hours(t: Tables) -> pd.DataFrame:
    b = t["bookings"]
    b = b[(b["resourceType"] == "Meeting Room") & (b["status"] == "confirmed")]
    m = b.merge(t["members"], on="memberId")
    g = m.groupby("companyName", as_index=False).agg(bookings=("bookingId", "count"), hours=("hours", "sum"))
    return g[["companyName", "bookings", "hours"]]


def food_bank_intake_by_category(t: Tables) -> pd.DataFrame:
    d = t["donations"].copy()
    d["Category"] = d["Category"].str.strip().str.title()
    d["Weight (kg)"] = num(d["Weight (kg)"])
    d = d[d["Donor Type"] != "Transfer"]
    g = d.groupby("Category", as_index=False).agg(
        Donations=("Donor", "count"), **{"Total kg": ("Weight (kg)", "sum")}
    )
    g["Total kg"] = g["Total kg"].round(1)
    return g.sort_values("Total kg", ascending=False)[["Category", "Donations", "Total kg"]]


def marathon_f40_top5(t: Tables) -> pd.DataFrame:
    r = t["results"]
    r = r[(r["Category"] == "F40") & (r["Status"] == "Finished")]
    cols = ["Bib", "First Name", "Last Name", "Club", "Net Time"]
    return r.sort_values("Net Time").head(5)[cols]


def car_rental_airport_returns(t: Tables) -> pd.DataFrame:
    r = t["rentals"].drop_duplicates(subset=["Agmt No"], keep="first")
    r = r[(r["Status"] == "Returned") & (r["Branch"] == "LHR")].copy()
    r["Km Driven"] = r["Odo In"] - r["Odo Out"]
    m = r.merge(t["fleet"], on="Plate")
    return m[["Agmt No", "Plate", "Make", "Model", "Km Driven"]]


def shelter_adoptions_by_species(t: Tables) -> pd.DataFrame:
    a = t["animal_status"].drop_duplicates(subset=["animal_id"], keep="first")
    a = a[a["outcome"] == "Adopted"]
    g = a.groupby("species", as_index=False).agg(
        adopted=("animal_id", "count"), avg_days_in_care=("days_in_care", "mean")
    )
    g["avg_days_in_care"] = g["avg_days_in_care"].round(1)
    return g[["species", "adopted", "avg_days_in_care"]]


def theatre_revenue_by_show(t: Tables) -> pd.DataFrame:
    s = t["ticket_sales"]
    s = s[s["type"] == "Sale"]
    p = t["price_bands"].copy()
    p["Price"] = num(p["Price"])
    m = s.merge(t["performances"], on="perf_code").merge(p, on="band_code")
    m["revenue"] = m["seats"] * m["Price"]
    g = m.groupby("show", as_index=False).agg(tickets=("seats", "sum"), revenue=("revenue", "sum"))
    g["revenue"] = g["revenue"].round(2)
    return g.sort_values("revenue", ascending=False)[["show", "tickets", "revenue"]]


def ski_busiest_lifts(t: Tables) -> pd.DataFrame:
    s = t["lift_scans"].drop_duplicates()
    s = s[s["passType"] != "Staff"]
    m = s.merge(t["lifts"], on="liftCode")
    g = m.groupby("liftName", as_index=False).agg(rides=("scanId", "count"), passes=("passId", "nunique"))
    return g.sort_values("rides", ascending=False).head(3)[["liftName", "rides", "passes"]]


def fishing_big_trout(t: Tables) -> pd.DataFrame:
    c = t["catch_log"].copy()
    c["Species"] = c["Species"].str.strip().str.title()
    c = c[c["Species"].isin(["Brown Trout", "Rainbow Trout"]) & (c["Length cm"] >= 40)].copy()
    c["Date"] = iso_date(c["Date"], "%m/%d/%Y")
    return c[["Date", "Angler", "Water", "Species", "Length cm"]]


def tutoring_sessions_to_invoice(t: Tables) -> pd.DataFrame:
    s = t["sessions"]
    s = s[s["Invoiced"] == "No"]
    m = s.merge(t["students"], left_on="Student ID", right_on="student_id")
    m = m.merge(t["tutors"], left_on="Tutor ID", right_on="tutorId")
    m["Fee"] = (m["Hours"] * m["hourlyRate"]).round(2)
    m = m.rename(columns={"student_name": "Student", "parent_email": "Parent Email", "tutorName": "Tutor"})
    return m[["Session ID", "Date", "Student", "Parent Email", "Tutor", "Fee"]]


def pizza_top_delivery_stores(t: Tables) -> pd.DataFrame:
    o = t["orders"].drop_duplicates().copy()
    o["order_total"] = num(o["order_total"])
    o = o[o["channel"] == "Delivery"]
    m = o.merge(t["stores"], on="store_no").merge(t["franchisees"], on="franchisee_id")
    g = m.groupby(["store_name", "owner_name"], as_index=False).agg(
        delivery_orders=("order_no", "count"), delivery_sales=("order_total", "sum")
    )
    g["delivery_sales"] = g["delivery_sales"].round(2)
    cols = ["store_name", "owner_name", "delivery_orders", "delivery_sales"]
    return g.sort_values("delivery_sales", ascending=False).head(3)[cols]


CASES: dict[str, CaseFn] = {
    "01_loyalty_miles_by_tier": loyalty_miles_by_tier,
    "02_dental_late_cancellations": dental_late_cancellations,
    "03_solar_output_by_site": solar_output_by_site,
    "04_wedding_vendor_balances": wedding_vendor_balances,
    "05_language_school_exam_averages": language_school_exam_averages,
    "06_coworking_meeting_room_hours": coworking_meeting_room_hours,
    "07_food_bank_intake_by_category": food_bank_intake_by_category,
    "08_marathon_f40_top5": marathon_f40_top5,
    "09_car_rental_airport_returns": car_rental_airport_returns,
    "10_shelter_adoptions_by_species": shelter_adoptions_by_species,
    "11_theatre_revenue_by_show": theatre_revenue_by_show,
    "12_ski_busiest_lifts": ski_busiest_lifts,
    "13_fishing_big_trout": fishing_big_trout,
    "14_tutoring_sessions_to_invoice": tutoring_sessions_to_invoice,
    "15_pizza_top_delivery_stores": pizza_top_delivery_stores,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
