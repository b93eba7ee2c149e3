"""What every hand-written plan corpus's ``make_wanted.py`` shares: the parsing helpers its case
functions use (numbers and dates written as a person's export writes them), and :func:`run`, which
recomputes (or with ``--check`` verifies) each case's ``wanted.csv`` and ``target_example.csv``
from its sources and the corpus's ``CASES``, and checks each ``case.json``.

A corpus's script puts this folder on ``sys.path`` and ends with
``sys.exit(run(HERE, CASES, __doc__))``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

EXAMPLE_ROWS = 5
NA_TOKENS = {"", "-", "n/a", "na", "none", "null", "nan"}

Tables = dict[str, pd.DataFrame]
CaseFn = Callable[[Tables], pd.DataFrame]


def _number(value: object) -> float:
    """'$1,234.50', '€1.689', '£129.00', '45%', '877.5', 'N/A', '-', '' -> float (NaN when missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan
    text = str(value).strip()
    if text.lower() in NA_TOKENS:
        return math.nan
    for junk in ("$", "€", "£", "%", ",", " "):
        text = text.replace(junk, "")
    return float(text)


def num(col: pd.Series) -> pd.Series:
    """Parse a column of numbers written as text."""
    return col.map(_number).astype(float)


def iso_date(col: pd.Series, fmt: str) -> pd.Series:
    """Parse dates written in one non-ISO format into ISO 'YYYY-MM-DD' text."""
    return pd.to_datetime(col.str.strip(), format=fmt).dt.strftime("%Y-%m-%d")


def load_sources(case_dir: Path) -> Tables:
    meta = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    return {name: pd.read_csv(case_dir / f"{name}.csv") for name in meta["sources"]}


def render(case_dir: Path, fn: CaseFn) -> dict[str, str]:
    """The text of wanted.csv and target_example.csv for one case."""
    wanted = fn(load_sources(case_dir)).reset_index(drop=True)
    return {
        "wanted.csv": wanted.to_csv(index=False),
        "target_example.csv": wanted.head(EXAMPLE_ROWS).to_csv(index=False),
    }


def check_layout(case_dir: Path) -> list[str]:
    """Problems with a case folder's case.json and example file (empty when it is well formed)."""
    problems: list[str] = []
    meta = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    if set(meta) != {"sources", "description", "ordered", "target_rows"}:
        problems.append(f"case.json keys are {sorted(meta)}")
    if not 1 <= len(meta.get("sources", [])) <= 3:
        problems.append("case.json must name 1-3 sources")
    for source in meta.get("sources", []):
        if not (case_dir / f"{source}.csv").exists():
            problems.append(f"source {source}.csv is missing")
    if not isinstance(meta.get("ordered"), bool):
        problems.append("ordered must be true or false")
    wanted_path, example_path = case_dir / "wanted.csv", case_dir / "target_example.csv"
    if wanted_path.exists() and example_path.exists():
        wanted, example = pd.read_csv(wanted_path), pd.read_csv(example_path)
        if not example.equals(wanted.head(EXAMPLE_ROWS)):
            problems.append("target_example.csv is not the first rows of wanted.csv")
        rows = meta.get("target_rows")
        if rows is not None and rows != len(wanted):
            problems.append(f"target_rows is {rows} but wanted.csv has {len(wanted)} rows")
    return problems


def run(here: Path, cases: Mapping[str, CaseFn], doc: str, argv: list[str] | None = None) -> int:
    """Rewrites (or with ``--check``, verifies) every case folder of ``here`` from ``cases``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify instead of rewriting; exit 1 on drift")
    args = parser.parse_args(argv)

    stale: list[str] = []
    folders = {p.parent.name for p in here.glob("*/case.json")}
    stale += [f"{name}: folder has no function in cases" for name in sorted(folders - set(cases))]
    for name, fn in cases.items():
        case_dir = here / name
        for filename, text in render(case_dir, fn).items():
            path = case_dir / filename
            if args.check:
                if not path.exists() or path.read_text(encoding="utf-8") != text:
                    stale.append(f"{name}/{filename}")
            else:
                path.write_text(text, encoding="utf-8")
    if args.check:
        for name in cases:
            stale += [f"{name}: {problem}" for problem in check_layout(here / name)]
        for item in stale:
            print(f"differs from its function: {item}", file=sys.stderr)
        print(f"{len(cases)} cases checked, {len(stale)} file(s) differ")
        return 1 if stale else 0
    print(f"wrote wanted.csv and target_example.csv for {len(cases)} cases")
    return 0
