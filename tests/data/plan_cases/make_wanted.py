"""Recompute ``wanted.csv`` and ``target_example.csv`` for every hand-written plan case.

Each case folder holds its source exports (``<table>.csv``) and a ``case.json`` naming them. The wanted
table of a case is what a data engineer would compute from those exports with the short pandas function
registered for it in ``CASES``; ``target_example.csv`` is its first five rows.

    python tests/data/plan_cases/make_wanted.py           # rewrite wanted.csv / target_example.csv
    python tests/data/plan_cases/make_wanted.py --check   # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from plan_corpus import CaseFn, Tables, iso_date, num, run  # noqa: E402


def shipped_order_revenue(t: Tables) -> pd.DataFrame:
    o = t["orders"]
    o = o[o["status"] == "shipped"].copy()
    o["revenue"] = (o["qty"] * o["unit_price"]).round(2)
    return o[["order_id", "order_date", "customer", "revenue"]]


def saas_mrr_by_plan(t: Tables) -> pd.DataFrame:
    s = t["subscriptions"].copy()
    s["price_per_seat"] = num(s["price_per_seat"])
    s = s[s["status"] == "active"].copy()
    s["mrr"] = s["seats"] * s["price_per_seat"]
    g = s.groupby("plan", as_index=False).agg(Accounts=("sub_id", "count"), MRR=("mrr", "sum"))
    g["MRR"] = g["MRR"].round(2)
    return g[["plan", "Accounts", "MRR"]]


def payroll_cost_by_department(t: Tables) -> pd.DataFrame:
    p = t["payroll"].drop_duplicates().copy()
    p["gross_pay"] = num(p["gross_pay"])
    m = p.merge(t["employees"], left_on="emp_id", right_on="Employee ID", how="inner")
    g = m.groupby("Department", as_index=False).agg(
        headcount=("emp_id", "nunique"), total_gross=("gross_pay", "sum")
    )
    g["total_gross"] = g["total_gross"].round(2)
    return g.sort_values("total_gross", ascending=False)[["Department", "headcount", "total_gross"]]


def clinic_no_shows(t: Tables) -> pd.DataFrame:
    a = t["appointments"]
    a = a[a["Status"] == "No-show"].copy()
    a["Date"] = iso_date(a["Date"], "%m/%d/%Y")
    return a[["Appt ID", "Patient", "Date", "Provider"]]


def express_transit_by_carrier(t: Tables) -> pd.DataFrame:
    s = t["shipments"]
    s = s[s["service"] == "Express"]
    g = s.groupby("carrier", as_index=False).agg(
        avg_transit_days=("transit_days", "mean"), fastest_days=("transit_days", "min")
    )
    g["avg_transit_days"] = g["avg_transit_days"].round(1)
    return g.sort_values("avg_transit_days")[["carrier", "avg_transit_days", "fastest_days"]]


def overdue_loans(t: Tables) -> pd.DataFrame:
    loans = t["loans"].copy()
    loans["loaned"] = iso_date(loans["loaned"], "%d.%m.%Y")
    loans["due"] = iso_date(loans["due"], "%d.%m.%Y")
    loans = loans[loans["status"] == "Overdue"]
    m = loans.merge(t["books"], on="barcode").merge(t["members"], left_on="card_no", right_on="Card Number")
    m = m.rename(columns={"due": "Due Date"})
    return m[["loan_id", "title", "Member Name", "Branch", "Due Date"]]


def top_main_dishes(t: Tables) -> pd.DataFrame:
    i = t["ticket_items"]
    i = i[i["category"] == "Mains"].copy()
    i["line_total"] = i["qty"] * i["price"]
    g = i.groupby("item", as_index=False).agg(Portions=("qty", "sum"), Revenue=("line_total", "sum"))
    return g.sort_values("Revenue", ascending=False).head(3)[["item", "Portions", "Revenue"]]


def term2_class_averages(t: Tables) -> pd.DataFrame:
    g = t["grades"].copy()
    g["score"] = num(g["score"])
    g = g.dropna(subset=["score"])
    g = g[g["term"] == "T2"]
    out = g.groupby(["class", "subject"], as_index=False).agg(
        students=("student_id", "count"), avg_score=("score", "mean")
    )
    out["avg_score"] = out["avg_score"].round(1)
    return out[["class", "subject", "students", "avg_score"]]


def site_energy_use(t: Tables) -> pd.DataFrame:
    r = t["readings"].drop_duplicates().copy()
    r["peak_kwh"] = num(r["peak_kwh"])
    r["offpeak_kwh"] = num(r["offpeak_kwh"])
    m = r.merge(t["meters"], left_on="meter_id", right_on="Meter")
    m["kwh"] = m["peak_kwh"] + m["offpeak_kwh"]
    g = m.groupby("Site", as_index=False).agg(total_kwh=("kwh", "sum"), largest_monthly_kwh=("kwh", "max"))
    g["total_kwh"] = g["total_kwh"].round(1)
    g["largest_monthly_kwh"] = g["largest_monthly_kwh"].round(1)
    return g[["Site", "total_kwh", "largest_monthly_kwh"]]


def active_listings_price_per_sqft(t: Tables) -> pd.DataFrame:
    li = t["listings"].copy()
    li["Sq Ft"] = num(li["Sq Ft"])
    li["List Price"] = num(li["List Price"])
    li = li[(li["Status"] == "Active") & (li["Bedrooms"] >= 3)].copy()
    li["Price per Sq Ft"] = (li["List Price"] / li["Sq Ft"]).round(2)
    cols = ["Listing ID", "Neighborhood", "Bedrooms", "List Price", "Price per Sq Ft"]
    return li.sort_values("Price per Sq Ft")[cols]


def meta_campaign_spend(t: Tables) -> pd.DataFrame:
    a = t["ad_stats"].copy()
    a["spend"] = num(a["spend"])
    a = a[a["channel"].isin(["Facebook", "Instagram"])]
    g = a.groupby(["campaign", "channel"], as_index=False).agg(
        total_spend=("spend", "sum"), total_clicks=("clicks", "sum")
    )
    g["total_spend"] = g["total_spend"].round(2)
    return g.sort_values("total_spend", ascending=False)[
        ["campaign", "channel", "total_spend", "total_clicks"]
    ]


def open_tickets_by_agent(t: Tables) -> pd.DataFrame:
    k = t["tickets"].copy()
    k["Assignee"] = k["Assignee"].str.strip()
    k["Priority"] = k["Priority"].str.strip().str.title()
    k = k[k["Status"] != "Closed"]
    g = k.groupby(["Assignee", "Priority"], as_index=False).agg(open_tickets=("Ticket #", "count"))
    return g[["Assignee", "Priority", "open_tickets"]]


def fleet_fuel_cost_by_depot(t: Tables) -> pd.DataFrame:
    f = t["fuel_log"].copy()
    f["Price per Litre"] = num(f["Price per Litre"])
    m = f.merge(t["vehicles"], left_on="Vehicle", right_on="unit_no")
    m["cost"] = m["Litres"] * m["Price per Litre"]
    g = m.groupby("depot", as_index=False).agg(litres=("Litres", "sum"), fuel_cost=("cost", "sum"))
    g["litres"] = g["litres"].round(1)
    g["fuel_cost"] = g["fuel_cost"].round(2)
    return g.sort_values("fuel_cost", ascending=False)[["depot", "litres", "fuel_cost"]]


def tickets_sold_by_event(t: Tables) -> pd.DataFrame:
    s = t["ticket_sales"]
    s = s[s["tier"] != "Comp"]
    m = s.merge(t["events"], left_on="event", right_on="event_id")
    g = m.groupby("event_name", as_index=False).agg(
        tickets_sold=("qty", "sum"), buyers=("buyer_email", "nunique")
    )
    return g[["event_name", "tickets_sold", "buyers"]]


def low_stock_with_supplier(t: Tables) -> pd.DataFrame:
    s = t["stock"]
    s = s[s["On Hand"] < 10]
    m = s.merge(t["suppliers"], left_on="SKU", right_on="sku", how="left")
    m = m.rename(columns={"supplier": "Supplier"})
    return m[["SKU", "Product", "Warehouse", "On Hand", "Supplier"]]


def casual_rides_top_stations(t: Tables) -> pd.DataFrame:
    r = t["trips"]
    r = r[r["rider_type"] == "casual"]
    g = r.groupby("start_station", as_index=False).agg(
        rides=("trip_id", "count"), avg_minutes=("duration_min", "mean")
    )
    g["avg_minutes"] = g["avg_minutes"].round(1)
    return g.sort_values("rides", ascending=False).head(3)[["start_station", "rides", "avg_minutes"]]


def hotel_room_type_revenue(t: Tables) -> pd.DataFrame:
    b = t["bookings"].drop_duplicates().copy()
    b["Nightly Rate"] = num(b["Nightly Rate"])
    b = b[b["Status"] != "Cancelled"].copy()
    b["Revenue"] = b["Nights"] * b["Nightly Rate"]
    g = b.groupby("Room Type", as_index=False).agg(
        **{"Room Nights": ("Nights", "sum"), "Revenue": ("Revenue", "sum")}
    )
    g["Revenue"] = g["Revenue"].round(2)
    return g[["Room Type", "Room Nights", "Revenue"]]


def billable_hours_invoice(t: Tables) -> pd.DataFrame:
    ts = t["timesheet"]
    ts = ts[ts["billable"] == "Y"]
    m = ts.merge(t["rates"], left_on="client", right_on="Client")
    m["amount"] = m["hours"] * m["Hourly Rate"]
    g = m.groupby("client", as_index=False).agg(hours=("hours", "sum"), invoice_total=("amount", "sum"))
    return g[["client", "hours", "invoice_total"]]


def gold_platinum_members(t: Tables) -> pd.DataFrame:
    m = t["members"].drop_duplicates(subset=["member_no"], keep="first").copy()
    m["name"] = m["name"].str.strip()
    m = m[m["plan"].isin(["Gold", "Platinum"])].copy()
    m["joined"] = iso_date(m["joined"], "%m/%d/%Y")
    return m[["member_no", "name", "plan", "joined"]]


def top_fundraising_campaigns(t: Tables) -> pd.DataFrame:
    d = t["donations"].drop_duplicates().copy()
    d["Amount"] = num(d["Amount"])
    d = d[d["Payment Status"] == "Succeeded"]
    g = d.groupby("Campaign", as_index=False).agg(Raised=("Amount", "sum"), Gifts=("Donation ID", "count"))
    g["Raised"] = g["Raised"].round(2)
    return g.sort_values("Raised", ascending=False).head(3)[["Campaign", "Raised", "Gifts"]]


def germany_traffic_by_device(t: Tables) -> pd.DataFrame:
    s = t["sessions"]
    s = s[s["country"] == "DE"]
    g = s.groupby("device", as_index=False).agg(
        unique_users=("user_id", "nunique"), pageviews=("pages", "sum")
    )
    return g[["device", "unique_users", "pageviews"]]


def crop_yield_per_hectare(t: Tables) -> pd.DataFrame:
    h = t["harvest"]
    h = h[h["Season"] == 2023]
    m = h.merge(t["fields"], left_on="Field", right_on="field_id")
    m["t_per_ha"] = m["Tonnes"] / m["hectares"]
    g = m.groupby("Crop", as_index=False).agg(fields=("Field", "count"), avg_t_per_ha=("t_per_ha", "mean"))
    g["avg_t_per_ha"] = g["avg_t_per_ha"].round(2)
    return g[["Crop", "fields", "avg_t_per_ha"]]


def dealer_net_sales_by_rep(t: Tables) -> pd.DataFrame:
    s = t["sales"].copy()
    s["Sale Price"] = num(s["Sale Price"])
    s["Trade-In Value"] = num(s["Trade-In Value"])
    reps = t["reps"]
    reps = reps[reps["Region"].isin(["North", "East"])]
    m = s.merge(reps, left_on="Salesperson", right_on="Name")
    m["Net Sale"] = m["Sale Price"] - m["Trade-In Value"]
    g = m.groupby(["Region", "Salesperson"], as_index=False).agg(
        **{"Deals": ("Deal #", "count"), "Net Sales": ("Net Sale", "sum")}
    )
    return g.sort_values("Net Sales", ascending=False)[["Region", "Salesperson", "Deals", "Net Sales"]]


def jfk_departure_delays(t: Tables) -> pd.DataFrame:
    f = t["flights"].copy()
    f["carrier"] = f["carrier"].str.strip().str.upper()
    f = f.dropna(subset=["dep_delay_min"])
    f = f[f["origin"] == "JFK"]
    g = f.groupby("carrier", as_index=False).agg(
        avg_delay=("dep_delay_min", "mean"), max_delay=("dep_delay_min", "max")
    )
    g["avg_delay"] = g["avg_delay"].round(1)
    return g.sort_values("avg_delay", ascending=False)[["carrier", "avg_delay", "max_delay"]]


def purchase_spend_by_supplier(t: Tables) -> pd.DataFrame:
    m = (
        t["po_lines"]
        .merge(t["products"], left_on="product_code", right_on="code")
        .merge(t["suppliers"], left_on="supplier_id", right_on="Supplier ID")
    )
    m["line_cost"] = m["qty"] * m["unit_cost"]
    g = m.groupby("Supplier Name", as_index=False).agg(
        orders=("po_number", "nunique"), total_cost=("line_cost", "sum")
    )
    g["total_cost"] = g["total_cost"].round(2)
    return g[["Supplier Name", "orders", "total_cost"]]


def completed_course_enrollments(t: Tables) -> pd.DataFrame:
    e = t["enrollments"].copy()
    e["progress"] = num(e["progress"])
    e = e[e["progress"] >= 100]
    m = e.merge(t["courses"], left_on="course_code", right_on="Course Code")
    return m[["enrollment_id", "student_email", "Title", "Instructor"]]


def big_tips(t: Tables) -> pd.DataFrame:
    d = t["deliveries"].copy()
    d["tip"] = num(d["tip"])
    d = d[d["tip"] >= 5]
    return d[["order_id", "restaurant", "courier", "tip"]]


def tenants_with_balance(t: Tables) -> pd.DataFrame:
    r = t["rent_roll"].copy()
    r["Monthly Rent"] = num(r["Monthly Rent"])
    r["Balance Due"] = num(r["Balance Due"])
    r = r[r["Balance Due"] > 0]
    return r.sort_values("Balance Due", ascending=False)[["Unit", "Tenant", "Monthly Rent", "Balance Due"]]


def clinic_revenue_by_specialty(t: Tables) -> pd.DataFrame:
    v = t["visits"]
    v = v[v["status"] == "completed"]
    m = v.merge(t["doctors"], on="doctor_id").merge(t["services"], left_on="service_code", right_on="Code")
    g = m.groupby("Specialty", as_index=False).agg(visits=("visit_id", "count"), revenue=("Fee", "sum"))
    return g.sort_values("revenue", ascending=False)[["Specialty", "visits", "revenue"]]


def leeds_top_stock_value(t: Tables) -> pd.DataFrame:
    i = t["inventory"]
    i = i[i["warehouse"] == "Leeds"].copy()
    i["stock_value"] = (i["qty_on_hand"] * i["unit_cost"]).round(2)
    cols = ["sku", "item_name", "qty_on_hand", "unit_cost", "stock_value"]
    return i.sort_values("stock_value", ascending=False).head(5)[cols]


def webinar_signups_clean(t: Tables) -> pd.DataFrame:
    s = t["signups"].copy()
    s["Email"] = s["Email"].str.strip().str.lower()
    s = s[s["Source"] == "Webinar"].copy()
    s["Signed Up"] = iso_date(s["Signed Up"], "%d/%m/%Y")
    return s[["Email", "First Name", "Last Name", "Signed Up"]]


def gym_bookings_by_class_type(t: Tables) -> pd.DataFrame:
    b = t["bookings"].drop_duplicates()
    b = b[b["status"] != "Cancelled"]
    m = b.merge(t["classes"], on="classId")
    g = m.groupby("classType", as_index=False).agg(
        Bookings=("bookingId", "count"), unique_members=("memberId", "nunique")
    )
    return g[["classType", "Bookings", "unique_members"]]


def glass_paper_by_district(t: Tables) -> pd.DataFrame:
    c = t["collections"].copy()
    c["District"] = c["District"].str.strip().str.title()
    c["Net Weight (kg)"] = num(c["Net Weight (kg)"])
    c = c[c["Material"].isin(["Glass", "Paper & Card"])]
    g = c.groupby(["District", "Material"], as_index=False).agg(
        **{"Total Kg": ("Net Weight (kg)", "sum"), "Max Load (kg)": ("Net Weight (kg)", "max")}
    )
    g["Total Kg"] = g["Total Kg"].round(1)
    return g[["District", "Material", "Total Kg", "Max Load (kg)"]]


def unpaid_invoices_to_chase(t: Tables) -> pd.DataFrame:
    i = t["invoices"].copy()
    i["Amt"] = num(i["Amt"])
    i["Due"] = iso_date(i["Due"], "%m/%d/%Y")
    i = i[(i["Status"] == "Unpaid") & (i["Amt"] >= 1000)]
    m = i.merge(t["clients"], left_on="Client", right_on="Client Name", how="left")
    return m.sort_values("Due")[["Inv #", "Client", "Due", "Amt", "Email"]]


def top_prod_cloud_services(t: Tables) -> pd.DataFrame:
    b = t["billing_items"].drop_duplicates().copy()
    b["cost"] = num(b["cost"])
    b = b[b["project"] == "shop-prod"]
    g = b.groupby("service", as_index=False).agg(
        **{"Total Cost": ("cost", "sum"), "Largest Line Item": ("cost", "max")}
    )
    g["Total Cost"] = g["Total Cost"].round(2)
    return g.sort_values("Total Cost", ascending=False).head(3)[
        ["service", "Total Cost", "Largest Line Item"]
    ]


def app_rating_by_version(t: Tables) -> pd.DataFrame:
    r = t["reviews"].drop_duplicates(subset=["reviewId"], keep="first")
    r = r.dropna(subset=["rating"])
    g = r.groupby("appVersion", as_index=False).agg(
        reviews=("reviewId", "count"), avg_rating=("rating", "mean")
    )
    g["avg_rating"] = g["avg_rating"].round(2)
    return g[["appVersion", "reviews", "avg_rating"]]


def picks_by_shift_and_zone(t: Tables) -> pd.DataFrame:
    p = t["picks"]
    p = p[p["Pick Status"] == "Confirmed"]
    m = p.merge(t["pickers"], left_on="Picker", right_on="Badge #").merge(
        t["locations"], left_on="Bin", right_on="bin_code"
    )
    g = m.groupby(["Shift", "zone"], as_index=False).agg(
        Units=("Qty", "sum"), Orders=("Order Ref", "nunique")
    )
    return g[["Shift", "zone", "Units", "Orders"]]


def top_rated_talk_submissions(t: Tables) -> pd.DataFrame:
    s = t["submissions"].copy()
    s["Speaker"] = s["Speaker"].str.strip()
    s["Track"] = s["Track"].str.strip()
    s = s[s["Avg Score"] >= 4]
    cols = ["Submission ID", "Title", "Speaker", "Track", "Avg Score"]
    return s.sort_values("Avg Score", ascending=False)[cols]


def league_top4_points(t: Tables) -> pd.DataFrame:
    r = t["results"]
    r = r[r["Competition"] != "Cup"].copy()
    r["GD"] = r["GF"] - r["GA"]
    g = r.groupby("Team", as_index=False).agg(Points=("Pts", "sum"), **{"Goal Difference": ("GD", "sum")})
    return g.sort_values("Points", ascending=False).head(4)[["Team", "Points", "Goal Difference"]]


def top_volunteers_by_hours(t: Tables) -> pd.DataFrame:
    s = t["shifts"].copy()
    s["volunteer"] = s["volunteer"].str.strip()
    s["hours_logged"] = num(s["hours_logged"])
    s = s.dropna(subset=["hours_logged"])
    g = s.groupby("volunteer", as_index=False).agg(
        total_hours=("hours_logged", "sum"), shifts=("shift_id", "count")
    )
    return g.sort_values("total_hours", ascending=False).head(5)[["volunteer", "total_hours", "shifts"]]


def nitrate_samples_over_limit(t: Tables) -> pd.DataFrame:
    s = t["samples"].copy()
    s["Collected"] = iso_date(s["Collected"], "%d.%m.%Y")
    s["Recovery"] = num(s["Recovery"])
    s = s[(s["Analyte"] == "Nitrate") & (s["Result (mg/L)"] > 50)]
    return s[["Sample No.", "Site", "Collected", "Result (mg/L)", "Recovery"]]


CASES: dict[str, CaseFn] = {
    "01_shipped_order_revenue": shipped_order_revenue,
    "02_saas_mrr_by_plan": saas_mrr_by_plan,
    "03_payroll_cost_by_department": payroll_cost_by_department,
    "04_clinic_no_shows": clinic_no_shows,
    "05_express_transit_by_carrier": express_transit_by_carrier,
    "06_overdue_loans": overdue_loans,
    "07_top_main_dishes": top_main_dishes,
    "08_term2_class_averages": term2_class_averages,
    "09_site_energy_use": site_energy_use,
    "10_active_listings_price_per_sqft": active_listings_price_per_sqft,
    "11_meta_campaign_spend": meta_campaign_spend,
    "12_open_tickets_by_agent": open_tickets_by_agent,
    "13_fleet_fuel_cost_by_depot": fleet_fuel_cost_by_depot,
    "14_tickets_sold_by_event": tickets_sold_by_event,
    "15_low_stock_with_supplier": low_stock_with_supplier,
    "16_casual_rides_top_stations": casual_rides_top_stations,
    "17_hotel_room_type_revenue": hotel_room_type_revenue,
    "18_billable_hours_invoice": billable_hours_invoice,
    "19_gold_platinum_members": gold_platinum_members,
    "20_top_fundraising_campaigns": top_fundraising_campaigns,
    "21_germany_traffic_by_device": germany_traffic_by_device,
    "22_crop_yield_per_hectare": crop_yield_per_hectare,
    "23_dealer_net_sales_by_rep": dealer_net_sales_by_rep,
    "24_jfk_departure_delays": jfk_departure_delays,
    "25_purchase_spend_by_supplier": purchase_spend_by_supplier,
    "26_completed_course_enrollments": completed_course_enrollments,
    "27_big_tips": big_tips,
    "28_tenants_with_balance": tenants_with_balance,
    "29_clinic_revenue_by_specialty": clinic_revenue_by_specialty,
    "30_leeds_top_stock_value": leeds_top_stock_value,
    "31_webinar_signups_clean": webinar_signups_clean,
    "32_gym_bookings_by_class_type": gym_bookings_by_class_type,
    "33_glass_paper_by_district": glass_paper_by_district,
    "34_unpaid_invoices_to_chase": unpaid_invoices_to_chase,
    "35_top_prod_cloud_services": top_prod_cloud_services,
    "36_app_rating_by_version": app_rating_by_version,
    "37_picks_by_shift_and_zone": picks_by_shift_and_zone,
    "38_top_rated_talk_submissions": top_rated_talk_submissions,
    "39_league_top4_points": league_top4_points,
    "40_top_volunteers_by_hours": top_volunteers_by_hours,
    "41_nitrate_samples_over_limit": nitrate_samples_over_limit,
}


if __name__ == "__main__":
    sys.exit(run(HERE, CASES, __doc__))
