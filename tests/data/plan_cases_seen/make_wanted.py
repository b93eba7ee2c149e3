"""Recompute wanted.csv and target_example.csv of the held-out plan cases from their sources.

Usage:
    .venv/bin/python tests/data/plan_cases_heldout/make_wanted.py           # rewrite the outputs
    .venv/bin/python tests/data/plan_cases_heldout/make_wanted.py --check   # exit 1 on any mismatch
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def read(
    case: str, table: str, thousands: str | None = None, na_values: list[str] | None = None
) -> pd.DataFrame:
    return pd.read_csv(HERE / case / f"{table}.csv", thousands=thousands, na_values=na_values)


def money(col: pd.Series) -> pd.Series:
    text = col.astype(str).str.strip().str.replace(r"[$€£,]", "", regex=True)
    return pd.to_numeric(text, errors="coerce")


def vet_fees_by_species(case: str) -> pd.DataFrame:
    visits = read(case, "visits")
    pets = read(case, "pets")
    df = visits.merge(pets, on="pet_id", how="inner")
    out = df.groupby("species", as_index=False).agg(
        Visits=("visit_id", "count"), **{"Total Fees": ("fee", "sum")}
    )
    out["Total Fees"] = out["Total Fees"].round(2)
    return out.rename(columns={"species": "Species"})


def museum_weekend_galleries(case: str) -> pd.DataFrame:
    df = read(case, "daily_counts")
    df = df[df["Day Type"] == "Weekend"].copy()
    df["Visitors"] = df["Adults"] + df["Children"]
    return df.groupby("Gallery", as_index=False).agg(
        **{"Weekend Visitors": ("Visitors", "sum"), "Busiest Day": ("Visitors", "max")}
    )


def parking_long_stays(case: str) -> pd.DataFrame:
    df = read(case, "sessions").drop_duplicates()
    df["Fee"] = money(df["Fee"])
    df["Start Date"] = pd.to_datetime(df["Start Date"], format="%d.%m.%Y").dt.strftime("%Y-%m-%d")
    df = df[df["Hours"] >= 3].copy()
    df["Fee per Hour"] = (df["Fee"] / df["Hours"]).round(2)
    return df[["Session ID", "Plate", "Zone", "Start Date", "Hours", "Fee", "Fee per Hour"]]


def insurance_top_agents(case: str) -> pd.DataFrame:
    claims = read(case, "claims")
    policies = read(case, "policies")
    df = claims.merge(policies, on="Policy No", how="inner")
    out = df.groupby("Agent", as_index=False).agg(
        Claims=("Claim No", "count"), **{"Total Claimed": ("Claim Amount", "sum")}
    )
    out["Total Claimed"] = out["Total Claimed"].round(2)
    return out.sort_values("Total Claimed", ascending=False).head(3)


def crowdfunding_by_category(case: str) -> pd.DataFrame:
    pledges = read(case, "pledges").drop_duplicates()
    pledges["Amount"] = money(pledges["Amount"])
    campaigns = read(case, "campaigns")
    df = pledges.merge(campaigns, left_on="Campaign ID", right_on="campaign_id", how="inner")
    out = df.groupby("category", as_index=False).agg(
        backers=("Backer Email", "nunique"), pledged_usd=("Amount", "sum")
    )
    return out


def brewery_batch_losses(case: str) -> pd.DataFrame:
    df = read(case, "batches")
    df["style"] = df["style"].str.strip()
    df = df[df["style"].isin(["IPA", "Stout"])].copy()
    df["loss_l"] = df["brewed_l"] - df["packaged_l"]
    return df[["batch", "style", "brewed_l", "packaged_l", "loss_l"]].rename(
        columns={
            "batch": "Batch",
            "style": "Style",
            "brewed_l": "Brewed (L)",
            "packaged_l": "Packaged (L)",
            "loss_l": "Loss (L)",
        }
    )


def podcast_show_platform(case: str) -> pd.DataFrame:
    downloads = read(case, "downloads", thousands=",")
    episodes = read(case, "episodes")
    df = downloads.merge(episodes, left_on="episode_id", right_on="Episode ID", how="inner")
    out = df.groupby(["Show", "platform"], as_index=False).agg(Downloads=("downloads", "sum"))
    return out.rename(columns={"platform": "Platform"})


def pharmacy_dispensing_costs(case: str) -> pd.DataFrame:
    rx = read(case, "dispensing")
    rx["Dispensed"] = pd.to_datetime(rx["Dispensed"], format="%m/%d/%Y").dt.strftime("%Y-%m-%d")
    drugs = read(case, "drugs")
    prescribers = read(case, "prescribers")
    df = rx.merge(drugs, left_on="Drug Code", right_on="drug_code", how="inner")
    df = df.merge(prescribers, left_on="Prescriber ID", right_on="prescriber_id", how="left")
    df["Cost"] = (df["Qty"] * df["unit_price"]).round(2)
    df = df.rename(columns={"drug_name": "Drug", "unit_price": "Unit Price", "prescriber": "Prescriber"})
    return df[["Rx No", "Dispensed", "Drug", "Qty", "Unit Price", "Cost", "Prescriber"]]


def cinema_film_ranking(case: str) -> pd.DataFrame:
    screenings = read(case, "screenings")
    screenings["occupancy"] = pd.to_numeric(screenings["occupancy"].str.rstrip("%"))
    films = read(case, "films")
    df = screenings.merge(films, on="film_id", how="inner")
    out = df.groupby("title", as_index=False).agg(
        Tickets=("tickets_sold", "sum"), **{"Avg Occupancy %": ("occupancy", "mean")}
    )
    out["Avg Occupancy %"] = out["Avg Occupancy %"].round(1)
    out = out.rename(columns={"title": "Film"})
    return out.sort_values("Tickets", ascending=False)


def water_unpaid_bills(case: str) -> pd.DataFrame:
    df = read(case, "bills")
    df = df.drop_duplicates(subset="bill_no", keep="first")
    df = df.dropna(subset=["amount_due"])
    df = df[df["status"] == "Unpaid"]
    return df[["bill_no", "account", "amount_due"]].rename(
        columns={"bill_no": "Bill", "account": "Account", "amount_due": "Amount Due"}
    )


def hackathon_top_teams(case: str) -> pd.DataFrame:
    scores = read(case, "scores")
    teams = read(case, "teams")
    df = scores.merge(teams, left_on="team", right_on="Team ID", how="inner")
    out = df.groupby(["Team Name", "Track"], as_index=False).agg(**{"Avg Score": ("score", "mean")})
    out["Avg Score"] = out["Avg Score"].round(2)
    return out.sort_values("Avg Score", ascending=False).head(4)


def lab_turnaround(case: str) -> pd.DataFrame:
    samples = read(case, "samples", na_values=["-"])
    samples = samples.dropna(subset=["Result"])
    labs = read(case, "labs")
    techs = read(case, "technicians")
    df = samples.merge(labs, on="Lab Code", how="inner").merge(techs, on="Tech ID", how="inner")
    out = df.groupby(["City", "Shift"], as_index=False).agg(
        Samples=("Sample ID", "count"), **{"Avg TAT (hrs)": ("TAT hrs", "mean")}
    )
    out["Avg TAT (hrs)"] = out["Avg TAT (hrs)"].round(1)
    return out


CASES: dict[str, Callable[[str], pd.DataFrame]] = {
    "01_vet_fees_by_species": vet_fees_by_species,
    "02_museum_weekend_galleries": museum_weekend_galleries,
    "03_parking_long_stays": parking_long_stays,
    "04_insurance_top_agents": insurance_top_agents,
    "05_crowdfunding_by_category": crowdfunding_by_category,
    "06_brewery_batch_losses": brewery_batch_losses,
    "07_podcast_show_platform": podcast_show_platform,
    "08_pharmacy_dispensing_costs": pharmacy_dispensing_costs,
    "09_cinema_film_ranking": cinema_film_ranking,
    "10_water_unpaid_bills": water_unpaid_bills,
    "11_hackathon_top_teams": hackathon_top_teams,
    "12_lab_turnaround": lab_turnaround,
}


def check_case_json(case: str, wanted: pd.DataFrame) -> list[str]:
    problems: list[str] = []
    path = HERE / case / "case.json"
    if not path.exists():
        return [f"{case}: case.json missing"]
    meta = json.loads(path.read_text())
    if set(meta) != {"sources", "description", "ordered", "target_rows"}:
        problems.append(f"{case}: case.json keys {sorted(meta)}")
    sources = meta.get("sources", [])
    if not isinstance(sources, list) or not 1 <= len(sources) <= 3:
        problems.append(f"{case}: sources must list 1-3 tables")
    else:
        for table in sources:
            if not (HERE / case / f"{table}.csv").exists():
                problems.append(f"{case}: source {table}.csv missing")
    if not isinstance(meta.get("description"), str) or not meta.get("description"):
        problems.append(f"{case}: description missing")
    if not isinstance(meta.get("ordered"), bool):
        problems.append(f"{case}: ordered must be a bool")
    target_rows = meta.get("target_rows")
    if target_rows is not None and target_rows != len(wanted):
        problems.append(f"{case}: target_rows {target_rows} != {len(wanted)} wanted rows")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    args = parser.parse_args()
    problems: list[str] = []
    for case, fn in CASES.items():
        wanted = fn(case).reset_index(drop=True)
        files = {
            "wanted.csv": wanted.to_csv(index=False),
            "target_example.csv": wanted.head(5).to_csv(index=False),
        }
        for name, text in files.items():
            path = HERE / case / name
            if args.check:
                if not path.exists() or path.read_text() != text:
                    problems.append(f"{case}/{name} differs from what make_wanted.py computes")
            else:
                path.write_text(text)
        problems += check_case_json(case, wanted)
    for problem in problems:
        print(problem, file=sys.stderr)
    if args.check and not problems:
        print(f"ok: {len(CASES)} cases")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
