"""Source tables as people export them: the raw material of the planning env's tasks.

A task hands the planner one business export (a *fact* table: orders, timesheets, shipments, ...) and
up to two *lookup* tables it references (customers, products, ...), plus example rows of what someone
wants out of them; the hidden pipeline that produced those rows (cleaning, join, filter, group-by,
sort, top-k, select) is picked by another module. This module only makes the sources, and makes them
look like the files people actually send: column names in each system's own style (``cust_id`` here,
``Customer ID`` in the CRM the customers come from), categories with their real spelling and case,
skewed amounts, ids that grow with time, the odd order whose customer is missing from the lookup,
only the columns someone picked, and, as one system's exports do, the name and categories of a thing
a fact refers to copied beside its id where no exported table lists it, and habits per thing (a
customer's usual channel): so a column such as a pupil or a customer repeats across rows that are
different records, which one row per key would wrongly collapse.

With ``dirty=True`` an export also carries a few (usually one to three) kinds of the dirt such files
carry (money written as ``"$1,234.50"``, ``"N/A"`` in a number column, stray spaces, ``"SHIPPED"``
next to ``"Shipped"``, rows exported twice, change-log versions of a row listed newest first, gaps,
dates in a local format), so the planner has to learn which cleaning a task needs instead of
assuming clean inputs.

Everything a frame holds is a str, an int, a float or missing (dates are strings), and an export's
frames are what reading them back from CSV gives (pandas' defaults, as ``orchestrl plan`` reads a
user's files: an empty cell or ``"N/A"`` is missing there, a column of numbers is numbers), so a
generated task and the same task through files are one task; every draw comes from the caller's
:class:`numpy.random.Generator`, so an export is a pure function of the generator's state.

The domains are data (:data:`DOMAINS`): a :class:`Domain` is a fact :class:`Table` and its lookups,
each a tuple of typed columns whose class is its *kind* (:data:`KINDS`), the meaning a downstream
module may rely on whatever the dirt did to the values.
"""

from __future__ import annotations

import datetime as dt
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

KINDS = ("id", "key", "category", "number", "date", "text")

# ---------------------------------------------------------------------------------------------------
# Schema: columns, tables, domains
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Code:
    """How identifiers are spelled: ``prefix`` and a number in ``[low, high)`` zero-padded to
    ``width``; plain integers when there is neither prefix nor width."""

    prefix: str
    low: int
    high: int
    width: int = 0

    def render(self, numbers: np.ndarray) -> np.ndarray | list[str]:
        if not self.prefix and not self.width:
            return np.asarray(numbers, dtype=np.int64)
        return [f"{self.prefix}{n:0{self.width}d}" for n in numbers]


@dataclass(frozen=True)
class Ident:
    """The fact table's row id: distinct, increasing with the row's date."""

    kind: ClassVar[str] = "id"
    name: str
    code: Code


@dataclass(frozen=True)
class Key:
    """A lookup table's own key (unique in the clean lookup)."""

    kind: ClassVar[str] = "key"
    name: str
    code: Code


@dataclass(frozen=True)
class Ref:
    """A fact column holding the key of the lookup table ``lookup`` (its name may differ)."""

    kind: ClassVar[str] = "key"
    name: str
    lookup: str


@dataclass(frozen=True)
class Category:
    """A few values spelled the way the source system spells them."""

    kind: ClassVar[str] = "category"
    name: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Number:
    """``low + (high - low) * Beta(*shape)``, snapped to ``step`` and rounded to ``decimals``
    (an int column when 0); ``unit`` says how a person would write it as text."""

    kind: ClassVar[str] = "number"
    name: str
    low: float
    high: float
    decimals: int = 0
    unit: Literal["", "money", "percent"] = ""
    step: float = 0.0
    shape: tuple[float, float] = (1.0, 1.0)


@dataclass(frozen=True)
class Date:
    """A business date within the export's period (ISO text)."""

    kind: ClassVar[str] = "date"
    name: str


@dataclass(frozen=True)
class Stamp:
    """When the row was last written: a few days after the date ``after``, or anywhere in the period.
    A table with a stamp can show change-log dirt (a row again, later, with changed values)."""

    kind: ClassVar[str] = "date"
    name: str
    after: str | None = None


@dataclass(frozen=True)
class Text:
    """Free text: one word of each part, joined by ``sep`` (names, titles, addresses, notes)."""

    kind: ClassVar[str] = "text"
    name: str
    parts: tuple[tuple[str, ...], ...]
    sep: str = " "

    @property
    def variety(self) -> int:
        return int(np.prod([len(part) for part in self.parts]))


Column = Ident | Key | Ref | Category | Number | Date | Stamp | Text


@dataclass(frozen=True, init=False)
class Table:
    """A table's name and its columns, in export order: ``Table("orders", Ident(...), Ref(...), ...)``."""

    name: str
    columns: tuple[Column, ...]

    def __init__(self, name: str, *columns: Column) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "columns", columns)

    @property
    def kinds(self) -> dict[str, str]:
        return {column.name: column.kind for column in self.columns}

    def of(self, *types: type) -> list[Any]:
        """The columns of the given classes, in table order."""
        return [column for column in self.columns if isinstance(column, types)]

    def column(self, name: str) -> Column:
        return next(column for column in self.columns if column.name == name)

    @property
    def row_key(self) -> Ident | Key:
        """What names a row: the fact's id or the lookup's key."""
        return self.of(Ident, Key)[0]

    @property
    def stamp(self) -> Stamp | None:
        stamps = self.of(Stamp)
        return stamps[0] if stamps else None


@dataclass(frozen=True, init=False)
class Domain:
    """A fact table and the lookups its :class:`Ref` columns point at."""

    name: str
    fact: Table
    lookups: tuple[Table, ...]

    def __init__(self, name: str, fact: Table, *lookups: Table) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fact", fact)
        object.__setattr__(self, "lookups", lookups)

    def lookup(self, name: str) -> Table:
        return next(table for table in self.lookups if table.name == name)

    def ref(self, lookup: Table) -> Ref:
        """The fact column that refers to ``lookup``."""
        return next(ref for ref in self.fact.of(Ref) if ref.lookup == lookup.name)


@dataclass(frozen=True)
class Join:
    """The fact's ``fact_column`` holds values of ``lookup``'s ``lookup_column``."""

    fact_column: str
    lookup: str
    lookup_column: str


# ---------------------------------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------------------------------

FIRST_NAMES = (
    "Ava", "Liam", "Maya", "Noah", "Zoe", "Omar", "Priya", "Lucas", "Elena", "Kenji", "Sofia", "Mateo",
    "Hana", "Ibrahim", "Chloe", "Diego", "Grace", "Tomasz", "Amara", "Felix", "Nadia", "Leo", "Ingrid",
    "Ravi",
)  # fmt: skip
LAST_NAMES = (
    "Smith", "Garcia", "Patel", "Nguyen", "Kowalski", "Okafor", "Schmidt", "Rossi", "Tanaka", "Silva",
    "Johnson", "Dubois", "Haddad", "Larsen", "Moreau", "Chen", "Novak", "Murphy", "Costa", "Ivanova",
)  # fmt: skip
PEOPLE = (FIRST_NAMES, LAST_NAMES)
COMPANIES = (
    (
        "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent", "Tyrell", "Wonka",
        "Stark", "Wayne", "Oscorp", "Cyberdyne", "Pied Piper", "Dunder", "Monarch", "Sterling",
        "Blue Harbor", "Northwind", "Contoso", "Fabrikam", "Tailspin",
    ),
    ("Inc.", "LLC", "Ltd", "Group", "Partners", "Co.", "Holdings"),
)  # fmt: skip
CITIES = (
    "Austin", "Denver", "Leeds", "Porto", "Lyon", "Gdansk", "Ghent", "Malmo", "Bilbao", "Turin", "Osaka",
    "Perth", "Halifax", "Tucson", "Bergen", "Cork",
)  # fmt: skip
ADDRESSES = (
    tuple(str(n) for n in range(3, 2400, 7)),
    ("Maple", "Oak", "Cedar", "Elm", "Pine", "Willow", "Harbor", "Lake", "Hill", "Park", "River", "Mill"),
    ("St", "Ave", "Rd", "Blvd", "Ln", "Dr", "Ct", "Way"),
)
PRODUCT_NAMES = (
    ("Garden", "Smart", "Travel", "Kitchen", "Desk", "Solar", "Pocket", "Studio"),
    ("Hose", "Lamp", "Kit", "Mug", "Chair", "Radio", "Scale", "Kettle", "Speaker"),
)
DEPARTMENT_NAMES = (
    (
        "Finance", "Engineering", "Operations", "Sales", "Marketing", "Legal", "People", "Procurement",
        "Facilities", "Data", "Security", "Support",
    ),
    ("EMEA", "Americas", "APAC"),
)  # fmt: skip
CARRIER_NAMES = (
    ("Swift", "Blue", "Rapid", "Polar", "Atlas", "Orbit", "Delta", "Falcon"),
    ("Freight", "Logistics", "Express", "Cargo"),
)
BOOK_TITLES = (
    ("The",),
    ("Silent", "Hidden", "Last", "Golden", "Broken", "Distant", "Crimson", "Wild"),
    ("River", "Garden", "Orchard", "Letter", "Kingdom", "Harbor", "Winter", "Island"),
)
PLAN_NAMES = (
    ("Starter", "Growth", "Pro", "Business", "Enterprise", "Team"),
    ("Monthly", "Annual"),
    ("2023", "2024", "2025", "Legacy"),
)
KITCHEN_NOTES = (
    ("No", "Extra", "Light", "Side of", "Sub"),
    ("onions", "cheese", "sauce", "ice", "salt", "dressing", "chili", "mayo"),
)
DISHES = (
    ("Grilled", "Roasted", "Spicy", "Smoked", "Crispy", "Garlic", "Lemon", "House"),
    ("Chicken", "Salmon", "Burger", "Risotto", "Tacos", "Salad", "Ramen", "Brownie"),
)
COURSE_TITLES = (
    ("Intro to", "Advanced", "Applied", "Foundations of", "Topics in"),
    ("Algebra", "Biology", "Chemistry", "French", "History", "Physics", "Art"),
)
TICKET_SUBJECTS = (
    ("Cannot", "Unable to", "Error when I", "How do I", "Slow when I"),
    (
        "log in", "export a report", "reset my password", "update billing details", "sync the calendar",
        "invite a teammate", "upload a file", "cancel my plan",
    ),
)  # fmt: skip
VAN_MODELS = (
    ("Ford Transit", "Mercedes Sprinter", "Iveco Daily", "VW Crafter", "Renault Master"),
    ("2019", "2020", "2021", "2022", "2023", "2024"),
)
SHOWS = (
    ("The",),
    ("Midnight", "Electric", "Velvet", "Neon", "Paper", "Golden", "Wild"),
    ("Owls", "Tides", "Foxes", "Echoes", "Lanterns", "Riders"),
    ("Live", "Unplugged", "World Tour", "Reunion"),
)
STOCK_ITEMS = (
    ("Hex", "Wood", "Machine", "Cable", "Zip", "Safety", "Packing", "Copper", "Steel"),
    ("Bolt M8", "Screw 40mm", "Tie 200mm", "Gloves L", "Tape 50m", "Washer", "Bracket"),
)
CAMPAIGN_TITLES = (
    ("Project", "The", "Tiny", "Open", "Pocket"),
    ("Aurora", "Atlas", "Nimbus", "Ember", "Quill", "Orbit", "Lumen"),
    ("Board Game", "Smart Lamp", "Documentary", "Vinyl Album", "Comic Book", "Synth"),
)
MERCHANTS = (
    ("Uber", "Delta", "Marriott", "Starbucks", "Amazon", "Staples", "Hilton", "Lyft", "Shell", "Airbnb"),
    CITIES,
)
HOTEL_NAMES = (("Hotel", "Grand", "The"), CITIES, ("Central", "Plaza", "Riverside"))

# ---------------------------------------------------------------------------------------------------
# Domains, each named in the style of the systems such files come from
# ---------------------------------------------------------------------------------------------------

WEBSHOP = Domain(
    "webshop",
    Table(
        "orders",
        Ident("order_id", Code("ORD-", 10_000, 60_000)),
        Ref("cust_id", "customers"),
        Ref("sku", "products"),
        Date("order_date"),
        Category("status", ("Placed", "Shipped", "Delivered", "Returned", "Cancelled")),
        Category("channel", ("web", "app", "marketplace", "phone")),
        Number("qty", 1, 12, shape=(1.0, 3.0)),
        Number("unit_price", 2.5, 480, decimals=2, unit="money", shape=(1.2, 4.0)),
        Number("discount_pct", 0, 30, unit="percent", step=5, shape=(1.0, 2.5)),
        Stamp("updated_at", after="order_date"),
    ),
    Table(
        "customers",
        Key("Customer ID", Code("C", 1_000, 10_000)),
        Text("Customer Name", COMPANIES),
        Category("Region", ("North", "South", "East", "West", "Central")),
        Category("Segment", ("Consumer", "Small Business", "Enterprise")),
        Number("Credit Limit", 500, 25_000, unit="money", step=500, shape=(1.5, 3.0)),
        Stamp("Last Updated"),
    ),
    Table(
        "products",
        Key("sku", Code("SKU-", 1_000, 10_000)),
        Text("product_name", PRODUCT_NAMES),
        Category("category", ("Kitchen", "Garden", "Toys", "Books", "Electronics", "Outdoor")),
        Number("list_price", 3, 500, decimals=2, unit="money", shape=(1.2, 4.0)),
    ),
)

PAYROLL = Domain(
    "payroll",
    Table(
        "timesheets",
        Ident("Entry No.", Code("", 40_000, 90_000)),
        Ref("Employee ID", "employees"),
        Ref("Dept", "departments"),
        Date("Work Date"),
        Category("Activity", ("Development", "Meetings", "Support", "Training", "Admin", "Travel")),
        Category("Approval", ("Approved", "Pending", "Rejected")),
        Number("Hours", 0.25, 10, decimals=2, step=0.25, shape=(3.0, 2.0)),
        Number("Rate", 25, 140, decimals=2, unit="money", shape=(2.0, 3.0)),
        Stamp("Submitted At", after="Work Date"),
    ),
    Table(
        "employees",
        Key("Employee ID", Code("E", 1_000, 9_999, 4)),
        Text("Full Name", PEOPLE),
        Category("Grade", ("Junior", "Mid", "Senior", "Lead", "Principal")),
        Category("Location", ("London", "Berlin", "Lisbon", "Warsaw", "Remote")),
        Number("Annual Salary", 28_000, 160_000, step=500, unit="money", shape=(2.0, 4.0)),
    ),
    Table(
        "departments",
        Key("Dept Code", Code("D", 100, 999)),
        Text("Department Name", DEPARTMENT_NAMES, sep=" - "),
        Category("Division", ("Corporate", "Product", "Field")),
        Number("Headcount Budget", 3, 120, shape=(1.2, 3.0)),
    ),
)

LOGISTICS = Domain(
    "logistics",
    Table(
        "shipments",
        Ident("shipmentId", Code("SHP", 1_000_000, 9_000_000, 7)),
        Ref("carrierCode", "carriers"),
        Text("consignee", COMPANIES),
        Category("originHub", ("LHR", "FRA", "AMS", "MAD", "WAW", "MXP")),
        Category("serviceLevel", ("Express", "Standard", "Economy", "Freight")),
        Category("status", ("Delivered", "In Transit", "Exception", "Returned")),
        Number("weightKg", 0.2, 80, decimals=1, shape=(1.0, 4.0)),
        Number("freightCost", 6, 1_800, decimals=2, unit="money", shape=(1.0, 5.0)),
        Date("shipDate"),
        Stamp("lastScanAt", after="shipDate"),
    ),
    Table(
        "carriers",
        Key("carrier_code", Code("CR", 100, 999)),
        Text("carrier_name", CARRIER_NAMES),
        Category("mode", ("Road", "Rail", "Air", "Sea")),
        Number("on_time_rate", 70, 99.5, decimals=1, unit="percent", shape=(4.0, 1.5)),
    ),
)

CLINIC = Domain(
    "clinic",
    Table(
        "appointments",
        Ident("Appt No.", Code("", 50_001, 90_000)),
        Ref("Dr ID", "doctors"),
        Text("Pt Name", PEOPLE),
        Date("Appt Date"),
        Category("Visit Type", ("Check-up", "Follow-up", "Vaccination", "Consult", "Urgent")),
        Category("Status", ("Completed", "No-show", "Cancelled", "Rescheduled")),
        Number("Dur (min)", 10, 60, step=5, shape=(2.0, 3.0)),
        Number("Fee", 40, 350, decimals=2, unit="money", shape=(1.5, 3.0)),
        Number("Ins. Covered", 0, 100, unit="percent", step=10, shape=(2.0, 1.5)),
    ),
    Table(
        "doctors",
        Key("Doctor ID", Code("DR", 100, 999)),
        Text("Name", (("Dr.",), *PEOPLE)),
        Category("Specialty", ("General Practice", "Pediatrics", "Cardiology", "Dermatology")),
        Category("Clinic", ("Northside", "Riverside", "Downtown", "Westfield")),
    ),
)

LIBRARY = Domain(
    "library",
    Table(
        "loans",
        Ident("loan_no", Code("", 200_000, 800_000)),
        Ref("isbn", "books"),
        Ref("member_no", "members"),
        Date("loan_date"),
        Category("branch", ("Central", "Eastside", "Harbor", "Hillcrest")),
        Category("status", ("On Loan", "Returned", "Overdue", "Lost")),
        Number("renewals", 0, 3, shape=(1.0, 3.0)),
        Number("fine_amt", 0, 25, decimals=2, unit="money", step=0.25, shape=(1.0, 6.0)),
    ),
    Table(
        "books",
        Key("ISBN", Code("978-1-", 100_000, 999_999, 6)),
        Text("Title", BOOK_TITLES),
        Category("Genre", ("Fiction", "Mystery", "Sci-Fi", "History", "Children", "Biography")),
        Number("Pages", 90, 900, shape=(2.0, 4.0)),
    ),
    Table(
        "members",
        Key("Member #", Code("", 10_000, 99_999)),
        Text("Member Name", PEOPLE),
        Category("Membership", ("Adult", "Child", "Student", "Senior")),
    ),
)

SAAS = Domain(
    "saas",
    Table(
        "subscriptions",
        Ident("subscriptionId", Code("sub_", 100_000, 900_000)),
        Ref("accountId", "accounts"),
        Ref("planId", "plans"),
        Category("status", ("active", "trialing", "past_due", "canceled")),
        Category("billingInterval", ("month", "quarter", "year")),
        Number("seats", 1, 250, shape=(1.0, 8.0)),
        Number("mrr", 0, 24_000, decimals=2, unit="money", shape=(1.0, 9.0)),
        Date("startedAt"),
        Stamp("updatedAt", after="startedAt"),
    ),
    Table(
        "plans",
        Key("planId", Code("plan_", 100, 999)),
        Text("planName", PLAN_NAMES),
        Category("tier", ("Free", "Starter", "Pro", "Enterprise")),
        Number("listPrice", 0, 900, decimals=2, unit="money", shape=(1.0, 3.0)),
    ),
    Table(
        "accounts",
        Key("account_id", Code("acct_", 1_000, 9_999)),
        Text("company", COMPANIES),
        Category("industry", ("SaaS", "Retail", "Fintech", "Healthcare", "Education", "Media")),
        Category("region", ("EMEA", "APAC", "AMER", "LATAM")),
        Stamp("last_synced"),
    ),
)

RESTAURANT = Domain(
    "restaurant",
    Table(
        "order_lines",
        Ident("Line ID", Code("", 700_000, 900_000)),
        Ref("Item Code", "menu_items"),
        Date("Served"),
        Category("Server", ("Maria", "Tom", "Aisha", "Kenji", "Luca")),
        Category("Payment", ("Card", "Cash", "Voucher", "Mobile")),
        Text("Note", KITCHEN_NOTES),
        Number("Qty", 1, 6, shape=(1.0, 4.0)),
        Number("Line Total", 3, 160, decimals=2, unit="money", shape=(1.5, 4.0)),
        Number("Tip", 0, 25, unit="percent", step=5, shape=(2.0, 2.0)),
    ),
    Table(
        "menu_items",
        Key("Item Code", Code("M", 100, 999)),
        Text("Item Name", DISHES),
        Category("Section", ("Starters", "Mains", "Desserts", "Drinks", "Sides")),
        Number("Menu Price", 3.5, 48, decimals=2, unit="money", step=0.5, shape=(2.0, 3.0)),
    ),
)

SCHOOL = Domain(
    "school",
    Table(
        "grades",
        Ident("grade_id", Code("", 1, 50_000)),
        Ref("student_no", "students"),
        Ref("course", "courses"),
        Category("term", ("Term 1", "Term 2", "Term 3")),
        Category("assessment", ("Exam", "Quiz", "Project", "Homework", "Lab")),
        Number("score", 0, 100, shape=(5.0, 2.0)),
        Number("weight_pct", 5, 40, unit="percent", step=5, shape=(1.5, 2.0)),
        Date("graded_on"),
    ),
    Table(
        "students",
        Key("Student No", Code("", 200_000, 299_999)),
        Text("Student Name", PEOPLE),
        Category("Year Group", ("Year 9", "Year 10", "Year 11", "Year 12")),
        Category("House", ("Red", "Blue", "Green", "Yellow")),
    ),
    Table(
        "courses",
        Key("course_code", Code("CRS-", 100, 999)),
        Text("course_title", COURSE_TITLES),
        Category("department", ("Mathematics", "Science", "Languages", "Humanities", "Arts")),
        Number("credits", 1, 6, shape=(2.0, 2.0)),
    ),
)

REAL_ESTATE = Domain(
    "real_estate",
    Table(
        "listings",
        Ident("MLS #", Code("MLS", 1_000_000, 9_000_000, 7)),
        Ref("Agent ID", "agents"),
        Text("Address", ADDRESSES),
        Category("Property Type", ("Condo", "Single Family", "Townhouse", "Multi-Family", "Land")),
        Category("Status", ("Active", "Pending", "Sold", "Withdrawn", "Expired")),
        Number("List Price", 120_000, 2_500_000, step=1_000, unit="money", shape=(1.5, 6.0)),
        Number("Sq Ft", 450, 5_200, step=10, shape=(2.0, 4.0)),
        Number("Beds", 1, 6, shape=(2.0, 3.0)),
        Date("Listed On"),
        Stamp("Last Modified", after="Listed On"),
    ),
    Table(
        "agents",
        Key("agent_id", Code("AG", 1_000, 9_999)),
        Text("agent_name", PEOPLE),
        Category("office", ("Downtown", "Northgate", "Lakeside", "Uptown")),
        Number("split_pct", 50, 90, unit="percent", step=5),
    ),
)

SUPPORT = Domain(
    "support",
    Table(
        "tickets",
        Ident("ticketId", Code("", 10_000, 90_000)),
        Ref("assigneeId", "agents"),
        Ref("requesterOrgId", "organizations"),
        Text("subject", TICKET_SUBJECTS),
        Category("priority", ("Low", "Normal", "High", "Urgent")),
        Category("channel", ("email", "chat", "phone", "web")),
        Category("status", ("open", "pending", "solved", "closed")),
        Number("firstReplyMins", 1, 720, shape=(1.0, 7.0)),
        Number("resolutionHrs", 0.2, 240, decimals=1, shape=(1.0, 6.0)),
        Number("csat", 1, 5, shape=(3.0, 1.5)),
        Date("createdAt"),
        Stamp("updatedAt", after="createdAt"),
    ),
    Table(
        "agents",
        Key("Agent Id", Code("", 100, 999)),
        Text("Agent Name", PEOPLE),
        Category("Team", ("Tier 1", "Tier 2", "Billing", "Enterprise")),
        Category("Shift", ("Day", "Night", "Weekend")),
    ),
    Table(
        "organizations",
        Key("Org ID", Code("ORG-", 1_000, 9_999)),
        Text("Organization", COMPANIES),
        Category("Plan", ("Basic", "Pro", "Enterprise")),
        Number("Seats", 5, 2_500, shape=(1.0, 6.0)),
        Stamp("Updated"),
    ),
)

ENERGY = Domain(
    "energy",
    Table(
        "readings",
        Ident("reading_id", Code("RD-", 100_000, 900_000, 6)),
        Ref("site_code", "sites"),
        Category("read_type", ("Smart Meter", "Manual", "Estimated")),
        Category("tariff", ("Peak", "Off-Peak", "Shoulder")),
        Number("kwh", 50, 12_000, decimals=1, shape=(1.2, 4.0)),
        Number("peak_kw", 5, 800, decimals=1, shape=(1.2, 4.0)),
        Number("cost_usd", 10, 3_000, decimals=2, unit="money", shape=(1.2, 4.0)),
        Date("reading_date"),
        Stamp("loaded_at", after="reading_date"),
    ),
    Table(
        "sites",
        Key("site_code", Code("S-", 100, 999)),
        Text("site_name", (CITIES, ("Plant", "Office", "Warehouse", "Store", "Data Centre"))),
        Category("region", ("EMEA", "APAC", "AMER", "LATAM")),
        Number("floor_area_m2", 200, 50_000, step=50, shape=(1.0, 4.0)),
    ),
)

FLEET = Domain(
    "fleet",
    Table(
        "trips",
        Ident("TripNo", Code("", 300_000, 900_000)),
        Ref("DriverID", "drivers"),
        Ref("VehicleNo", "vehicles"),
        Date("TripDate"),
        Category("Purpose", ("Delivery", "Pickup", "Service Call", "Transfer")),
        Category("Status", ("Completed", "Cancelled", "Delayed")),
        Number("DistanceKm", 2, 650, decimals=1, shape=(1.2, 5.0)),
        Number("FuelL", 0.5, 90, decimals=1, shape=(1.2, 5.0)),
        Number("TollsAmt", 0, 60, decimals=2, unit="money", shape=(1.0, 5.0)),
    ),
    Table(
        "drivers",
        Key("driver_id", Code("DRV", 1_000, 9_999)),
        Text("driver_name", PEOPLE),
        Category("depot", ("North", "South", "Central", "Port")),
        Category("license_class", ("B", "C", "C+E", "D")),
    ),
    Table(
        "vehicles",
        Key("Fleet No.", Code("FL-", 100, 999)),
        Text("Model", VAN_MODELS),
        Category("Fuel Type", ("Diesel", "Electric", "Hybrid", "Petrol")),
        Number("Odometer km", 5_000, 320_000, shape=(1.5, 2.5)),
    ),
)

EVENTS = Domain(
    "events",
    Table(
        "ticket_sales",
        Ident("sale_id", Code("TS", 100_000, 900_000, 6)),
        Ref("venue_id", "venues"),
        Text("event", SHOWS),
        Category("tier", ("GA", "VIP", "Balcony", "Floor", "Box")),
        Category("channel", ("Online", "Box Office", "Reseller", "Phone")),
        Number("tix", 1, 8, shape=(1.0, 3.0)),
        Number("amt", 15, 1_200, decimals=2, unit="money", shape=(1.2, 5.0)),
        Date("sold_on"),
    ),
    Table(
        "venues",
        Key("Venue ID", Code("", 100, 999)),
        Text("Venue", (CITIES, ("Arena", "Hall", "Theatre", "Ballroom", "Amphitheatre"))),
        Category("City", ("Austin", "Denver", "Chicago", "Seattle", "Atlanta", "Boston")),
        Number("Capacity", 300, 20_000, step=50, shape=(1.0, 3.0)),
    ),
)

INVENTORY = Domain(
    "inventory",
    Table(
        "movements",
        Ident("Mvmt No.", Code("", 1_000_000, 9_000_000)),
        Ref("Item No.", "products"),
        Ref("Whse", "warehouses"),
        Category("Mvmt Type", ("Receipt", "Issue", "Transfer", "Adjustment", "Return")),
        Category("Reason", ("Sales Order", "Purchase Order", "Cycle Count", "Damage", "Production")),
        Number("Qty", 1, 500, shape=(1.0, 6.0)),
        Number("Unit Cost", 0.5, 300, decimals=2, unit="money", shape=(1.0, 5.0)),
        Date("Posting Date"),
        Stamp("Loaded At", after="Posting Date"),
    ),
    Table(
        "products",
        Key("Item No.", Code("", 10_000, 99_999)),
        Text("Description", STOCK_ITEMS),
        Category("Item Category", ("Fasteners", "Electrical", "Packaging", "Tools", "Safety")),
        Category("UoM", ("EA", "BOX", "KG", "M", "PK")),
    ),
    Table(
        "warehouses",
        Key("Warehouse Code", Code("WH", 10, 99)),
        Text("Warehouse Name", (CITIES, ("DC", "Depot", "Hub"))),
        Category("Country", ("US", "CA", "MX", "DE", "PL", "NL")),
        Number("Bins", 200, 9_000, step=10, shape=(1.5, 3.0)),
    ),
)

CROWDFUNDING = Domain(
    "crowdfunding",
    Table(
        "pledges",
        Ident("pledgeId", Code("", 5_000_000, 9_000_000)),
        Ref("campaignId", "campaigns"),
        Text("backerName", PEOPLE),
        Category("rewardTier", ("No Reward", "Early Bird", "Standard", "Deluxe", "Collector")),
        Category("paymentStatus", ("Collected", "Pending", "Failed", "Refunded")),
        Category("country", ("US", "GB", "DE", "CA", "AU", "FR")),
        Number("amount", 1, 2_500, decimals=2, unit="money", shape=(1.0, 8.0)),
        Number("addOns", 0, 4, shape=(1.0, 4.0)),
        Date("pledgedOn"),
    ),
    Table(
        "campaigns",
        Key("campaign_id", Code("CMP-", 1_000, 9_999)),
        Text("title", CAMPAIGN_TITLES),
        Category("category", ("Games", "Tech", "Design", "Film", "Music", "Publishing")),
        Number("goal_usd", 2_000, 250_000, step=500, unit="money", shape=(1.0, 4.0)),
    ),
)

EXPENSES = Domain(
    "expenses",
    Table(
        "expense_claims",
        Ident("Claim ID", Code("EXP-", 100_000, 900_000, 6)),
        Text("Employee", PEOPLE),
        Text("Merchant", MERCHANTS),
        Category("Category", ("Travel", "Meals", "Lodging", "Software", "Office Supplies", "Training")),
        Category("Payment Method", ("Corporate Card", "Personal Card", "Cash")),
        Category("Status", ("Submitted", "Approved", "Rejected", "Reimbursed")),
        Number("Amount", 5, 2_500, decimals=2, unit="money", shape=(1.0, 7.0)),
        Number("Tax", 0, 300, decimals=2, shape=(1.0, 7.0)),
        Date("Submitted"),
        Stamp("Reviewed At", after="Submitted"),
    ),
)

HOTEL = Domain(
    "hotel",
    Table(
        "bookings",
        Ident("Booking Ref", Code("BK", 10_000, 90_000, 5)),
        Ref("Property", "properties"),
        Text("Guest", PEOPLE),
        Category("Room Type", ("Standard", "Deluxe", "Suite", "Family")),
        Category("Source", ("Direct", "Booking.com", "Expedia", "Corporate", "Walk-in")),
        Category("Status", ("Confirmed", "Checked Out", "Cancelled", "No Show")),
        Number("Nights", 1, 14, shape=(1.0, 4.0)),
        Number("ADR", 60, 650, decimals=2, unit="money", shape=(2.0, 5.0)),
        Date("Arrival"),
    ),
    Table(
        "properties",
        Key("Property Code", Code("H", 10, 99, 3)),
        Text("Hotel Name", HOTEL_NAMES),
        Category("Brand", ("Harbor Inn", "Skyline", "Oakwood Suites")),
        Category("Country", ("US", "GB", "ES", "IT", "JP")),
        Number("Rooms", 40, 600, step=5, shape=(1.5, 3.0)),
    ),
)

DOMAINS: tuple[Domain, ...] = (
    WEBSHOP, PAYROLL, LOGISTICS, CLINIC, LIBRARY, SAAS, RESTAURANT, SCHOOL, REAL_ESTATE, SUPPORT, ENERGY,
    FLEET, EVENTS, INVENTORY, CROWDFUNDING, EXPENSES, HOTEL,
)  # fmt: skip
DOMAIN_BY_NAME = {domain.name: domain for domain in DOMAINS}

# ---------------------------------------------------------------------------------------------------
# Clean exports
# ---------------------------------------------------------------------------------------------------

FACT_ROWS = (20, 120)
LOOKUP_ROWS = (6, 60)
ORPHAN_SHARE = 0.25  # how often a fact refers to a few keys its lookup lacks
LEFT_OUT = 4  # most columns a fact export leaves out
DENORMALISED = 0.5  # how often a fact carries attributes of a thing it refers to, unexported
HABIT_SHARE = 0.5  # how often a fact's category is a habit of the thing a reference names
HABIT = 0.85  # how often a row takes the habitual value of the thing it refers to


@dataclass(frozen=True, eq=False)
class Export:
    """One task's sources: the fact table first, then its lookups; ``kinds`` gives each column's
    meaning (one of :data:`KINDS`), whatever dirt its values carry."""

    domain: str
    sources: dict[str, pd.DataFrame]
    kinds: dict[str, dict[str, str]]

    @property
    def row_keys(self) -> dict[str, str]:
        """Each table's row key: the column that names a row (the fact's id, a lookup's key)."""
        domain = DOMAIN_BY_NAME[self.domain]
        tables = {table.name: table for table in (domain.fact, *domain.lookups)}
        return {name: tables[name].row_key.name for name in self.sources}

    @property
    def joins(self) -> tuple[Join, ...]:
        """How each exported lookup joins the fact table."""
        domain = DOMAIN_BY_NAME[self.domain]
        return tuple(
            Join(domain.ref(lookup).name, lookup.name, lookup.row_key.name)
            for lookup in domain.lookups
            if lookup.name in self.sources
        )


@dataclass(frozen=True)
class Period:
    """The days an export covers: ``start`` and the ``days`` after it."""

    start: dt.date
    days: int

    def iso(self, offsets: np.ndarray) -> list[str]:
        return [(self.start + dt.timedelta(days=int(offset))).isoformat() for offset in offsets]


def generate_sources(rng: np.random.Generator, tables: int, dirty: bool) -> Export:
    """A fact table and ``tables - 1`` of its lookups, from a domain drawn among those that have
    enough lookups; with ``dirty``, some kinds of :data:`DIRT` on top (at least one)."""
    if not 1 <= tables <= 3:
        raise ValueError(f"tables must be 1, 2 or 3, not {tables}")
    eligible = [domain for domain in DOMAINS if len(domain.lookups) >= tables - 1]
    domain = eligible[rng.integers(len(eligible))]
    picked = np.sort(rng.choice(len(domain.lookups), size=tables - 1, replace=False))
    lookups = [domain.lookups[i] for i in picked]

    period = Period(
        dt.date(int(rng.integers(2023, 2027)), int(rng.integers(1, 13)), 1), int(rng.integers(60, 366))
    )
    keys = {lookup.name: draw_keys(rng, lookup) for lookup in domain.lookups}  # unexported ones too
    fact_rows = int(rng.integers(FACT_ROWS[0], FACT_ROWS[1] + 1))
    frames = {domain.fact.name: draw_table(rng, domain.fact, fact_rows, period, domain, keys)}
    for lookup in lookups:
        frames[lookup.name] = draw_table(rng, lookup, len(keys[lookup.name]), period, domain, keys)
    frames[domain.fact.name] = narrow(rng, frames[domain.fact.name], domain.fact, lookups)
    schema = {table.name: exported(table, frames[table.name]) for table in (domain.fact, *lookups)}
    if dirty:
        frames = soil(rng, frames, schema)
    kinds = {name: table.kinds for name, table in schema.items()}
    for lookup in domain.lookups:  # attributes of a thing no exported table lists
        if lookup not in lookups and rng.random() < DENORMALISED:
            lookup_frame = draw_table(rng, lookup, len(keys[lookup.name]), period, domain, keys)
            fact, added = denormalise(rng, frames[domain.fact.name], domain, lookup, lookup_frame)
            frames[domain.fact.name] = fact
            kinds[domain.fact.name] = {c: kinds[domain.fact.name].get(c) or added[c] for c in fact.columns}
    frames = {name: as_read_back(frame) for name, frame in frames.items()}
    return Export(domain.name, frames, kinds)


def narrow(rng: np.random.Generator, fact: pd.DataFrame, table: Table, lookups: list[Table]) -> pd.DataFrame:
    """``fact`` without up to :data:`LEFT_OUT` of its columns (an export of the columns someone
    picked): never its row key, its stamp, a reference to an exported lookup, or its first measure."""
    kept = {
        table.row_key.name,
        *(stamp.name for stamp in table.of(Stamp)),
        table.of(Number)[0].name,
        *(ref.name for ref in table.of(Ref) if ref.lookup in {lookup.name for lookup in lookups}),
    }
    droppable = [c for c in fact.columns if c not in kept]
    count = min(len(droppable), int(rng.integers(0, LEFT_OUT + 1)))
    dropped = {droppable[i] for i in rng.choice(len(droppable), size=count, replace=False)}
    return fact[[c for c in fact.columns if c not in dropped]]


def exported(table: Table, frame: pd.DataFrame) -> Table:
    """``table`` with only the columns ``frame`` has (what the dirt may hit, and the kinds)."""
    return Table(table.name, *(column for column in table.columns if column.name in frame.columns))


def denormalise(
    rng: np.random.Generator, fact: pd.DataFrame, domain: Domain, lookup: Table, frame: pd.DataFrame
) -> tuple[pd.DataFrame, dict[str, str]]:
    """``fact`` with one to three of ``lookup``'s names and categories copied in after the column
    that refers to it (a customer's name beside its id, as exports from one system carry them),
    and their kinds. A thing's rows then agree on them: different records of one thing, not
    versions of one record."""
    ref = domain.ref(lookup).name
    attributes = [c.name for c in lookup.of(Text, Category) if c.name not in fact.columns]
    if ref not in fact.columns or not attributes:
        return fact, {}
    count = min(len(attributes), int(rng.integers(1, 4)))
    picked = [attributes[i] for i in sorted(rng.choice(len(attributes), size=count, replace=False))]
    key = lookup.row_key.name
    values = frame.set_index(frame[key].astype(str))[picked]
    refs = fact[ref].astype(str).str.strip()
    unknown = sorted(set(refs) - set(values.index))  # things the lookup lacks have attributes too
    others = values.iloc[rng.choice(len(values), size=len(unknown))].set_axis(unknown)
    copied = pd.concat([values, others]).reindex(refs).reset_index(drop=True)
    at = list(fact.columns).index(ref) + 1
    columns = [*fact.columns[:at], *picked, *fact.columns[at:]]
    out = pd.concat([fact.reset_index(drop=True), copied], axis=1)[columns]
    return out, {name: lookup.kinds[name] for name in picked}


def as_read_back(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` written as a CSV file and read back with pandas' defaults (what a user's file of it
    reads as)."""
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def draw_keys(rng: np.random.Generator, lookup: Table) -> np.ndarray:
    """The numbers behind a lookup's keys, ascending (as lookups usually are); no more rows than the
    lookup has distinct names for."""
    code = lookup.row_key.code
    room = min([code.high - code.low] + [text.variety for text in lookup.of(Text)])
    rows = min(int(rng.integers(LOOKUP_ROWS[0], LOOKUP_ROWS[1] + 1)), room)
    return np.sort(code.low + rng.choice(code.high - code.low, size=rows, replace=False))


def draw_table(
    rng: np.random.Generator,
    table: Table,
    rows: int,
    period: Period,
    domain: Domain,
    keys: dict[str, np.ndarray],
) -> pd.DataFrame:
    """One clean table. Columns are drawn independently, then rows are put in date order so that ids
    grow with time; stamps follow their dates by a few days."""
    drawn: dict[str, np.ndarray] = {}
    for column in table.columns:
        match column:
            case Key():
                drawn[column.name] = keys[table.name]
            case Ref():
                drawn[column.name] = draw_refs(rng, keys[column.lookup], domain.lookup(column.lookup), rows)
            case Category():
                drawn[column.name] = draw_category(rng, column, rows)
            case Number():
                raw = column.low + (column.high - column.low) * rng.beta(*column.shape, size=rows)
                drawn[column.name] = shape_number(column, raw)
            case Date():
                drawn[column.name] = rng.integers(0, period.days, size=rows)
            case Text():
                drawn[column.name] = draw_text(rng, column, rows, unique=isinstance(table.row_key, Key))
    refs = table.of(Ref)
    for category in table.of(Category) if refs else ():
        if rng.random() < HABIT_SHARE:
            drawn[category.name] = draw_habit(
                rng, drawn[refs[rng.integers(len(refs))].name], drawn[category.name]
            )
    dates = table.of(Date)
    if dates:
        order = np.argsort(drawn[dates[0].name], kind="stable")
        drawn = {name: values[order] for name, values in drawn.items()}
    for stamp in table.of(Stamp):
        if stamp.after is None:
            drawn[stamp.name] = rng.integers(0, period.days, size=rows)
        else:
            drawn[stamp.name] = drawn[stamp.after] + rng.integers(0, 4, size=rows)
    for ident in table.of(Ident):
        gaps = np.where(rng.random(rows) < 0.1, rng.integers(2, 6, size=rows), 1)
        start = int(rng.integers(ident.code.low, ident.code.high - 6 * rows))
        drawn[ident.name] = start + np.cumsum(gaps) - gaps[0]

    def rendered(column: Column) -> Any:
        values = drawn[column.name]
        match column:
            case Ident() | Key():
                return column.code.render(values)
            case Ref():
                return domain.lookup(column.lookup).row_key.code.render(values)
            case Date() | Stamp():
                return period.iso(values)
            case Category() | Text():
                return values.tolist()
        return values

    return pd.DataFrame({column.name: rendered(column) for column in table.columns})


def draw_refs(rng: np.random.Generator, keys: np.ndarray, lookup: Table, rows: int) -> np.ndarray:
    """Fact references to a lookup: a few keys are popular, most are used, and sometimes one to
    three rows name a key the lookup lacks."""
    popularity = 1.0 / np.arange(1, len(keys) + 1) ** rng.uniform(0.2, 1.0)
    popularity = rng.permutation(popularity / popularity.sum())
    refs = rng.choice(keys, size=rows, p=popularity)
    if rng.random() < ORPHAN_SHARE:
        code = lookup.row_key.code
        count = int(rng.integers(1, 4))
        candidates = code.low + rng.choice(code.high - code.low, size=len(keys) + count, replace=False)
        known = set(keys.tolist())
        strangers = [number for number in candidates.tolist() if number not in known][:count]
        refs[rng.choice(rows, size=count, replace=False)] = strangers
    return refs


def draw_habit(rng: np.random.Generator, refs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` where most rows (:data:`HABIT`) take the usual value of the thing their reference
    names (a customer's usual channel, a pupil's instrument): rows naming one thing are different
    records that still share some attributes, as in real exports."""
    keys, first = np.unique(refs, return_index=True)
    usual = dict(zip(keys.tolist(), values[first], strict=True))  # each thing's first value
    habitual = np.array([usual[ref] for ref in refs.tolist()], dtype=values.dtype)
    return np.where(rng.random(len(refs)) < HABIT, habitual, values)


def draw_category(rng: np.random.Generator, column: Category, rows: int) -> np.ndarray:
    """Values with shares that differ from export to export."""
    shares = rng.dirichlet(np.full(len(column.values), 4.0))
    return np.array(column.values, dtype=object)[rng.choice(len(column.values), size=rows, p=shares)]


def draw_text(rng: np.random.Generator, column: Text, rows: int, unique: bool) -> np.ndarray:
    """One word per part; ``unique`` draws distinct combinations (a lookup's names)."""
    if unique:
        flat = rng.choice(column.variety, size=rows, replace=False)
        picks = []
        for part in reversed(column.parts):
            flat, index = np.divmod(flat, len(part))
            picks.append(index)
        picks.reverse()
    else:
        picks = [rng.integers(len(part), size=rows) for part in column.parts]
    words = [np.array(part, dtype=object)[index] for part, index in zip(column.parts, picks, strict=True)]
    return np.array([column.sep.join(row) for row in zip(*words, strict=True)], dtype=object)


def shape_number(column: Number, raw: np.ndarray) -> np.ndarray:
    """Raw draws snapped to the column's step, range and decimals (ints when it has none)."""
    values = np.round(raw / column.step) * column.step if column.step else raw
    values = np.round(np.clip(values, column.low, column.high), column.decimals)
    return values.astype(np.int64) if column.decimals == 0 else values


# ---------------------------------------------------------------------------------------------------
# Dirt
# ---------------------------------------------------------------------------------------------------

DIRT_SHARE = 0.25  # each applicable kind of dirt, independently
CHANGE_LOG_SHARE = 0.45  # a table with a stamp exported as its change log (versions of rows)
NA_TOKENS = ("N/A", "n/a", "-", "")
DATE_FORMATS = ("%d/%m/%Y", "%m/%d/%Y", "%d %b %Y", "%a %d/%m/%Y")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
PADS = ((" ", ""), ("", " "), (" ", " "), ("  ", ""), ("", "  "))


@dataclass(frozen=True)
class Dirt:
    """One kind of dirt: the columns of a table it can hit, and how it hits one of them (``apply`` may
    change the frame it is given, a copy, and returns the dirty frame)."""

    name: str
    targets: Callable[[Table, pd.DataFrame], list[str]]
    apply: Callable[[np.random.Generator, Table, pd.DataFrame, str], pd.DataFrame]
    share: float = DIRT_SHARE


def soil(
    rng: np.random.Generator, frames: dict[str, pd.DataFrame], schema: dict[str, Table]
) -> dict[str, pd.DataFrame]:
    """Each applicable kind of dirt with its probability (:data:`DIRT_SHARE`, one at least), on one
    column drawn among those it can hit, in :data:`DIRT`'s order."""
    targets = {
        dirt.name: [
            (name, column) for name, table in schema.items() for column in dirt.targets(table, frames[name])
        ]
        for dirt in DIRT
    }
    usable = [dirt for dirt in DIRT if targets[dirt.name]]
    drawn = [dirt for dirt in usable if rng.random() < dirt.share]
    if not drawn:
        drawn = [usable[rng.integers(len(usable))]]
    frames = dict(frames)
    for dirt in drawn:
        name, column = targets[dirt.name][rng.integers(len(targets[dirt.name]))]
        frames[name] = dirt.apply(rng, schema[name], frames[name].copy(), column)
    return frames


def some_rows(rng: np.random.Generator, rows: int, low: float, high: float) -> np.ndarray:
    """A share in ``[low, high)`` of the row positions (one at least)."""
    count = max(1, round(rng.uniform(low, high) * rows))
    return np.sort(rng.choice(rows, size=count, replace=False))


def insert_after(
    rng: np.random.Generator, frame: pd.DataFrame, extra: pd.DataFrame, sources: np.ndarray
) -> pd.DataFrame:
    """``frame`` with each row of ``extra`` placed somewhere after the row it copies."""
    rows = len(frame)
    places = sources + 0.5 + rng.integers(0, rows - sources)
    order = np.argsort(np.concatenate([np.arange(rows), places]), kind="stable")
    return pd.concat([frame, extra], ignore_index=True).iloc[order].reset_index(drop=True)


def add_versions(rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Change-log style: a few rows (named by ``column``) again, later, with a new status and
    sometimes a new amount; the log listed newest first, as change-log exports are (so the first
    row of a record is its latest)."""
    sources = some_rows(rng, len(frame), 0.03, 0.1)
    later = frame.iloc[sources].copy()
    categories, numbers = table.of(Category), table.of(Number)
    category = categories[rng.integers(len(categories))]
    later[category.name] = [
        others[rng.integers(len(others))]
        for others in ([value for value in category.values if value != old] for old in later[category.name])
    ]
    if numbers and rng.random() < 0.5:
        number = numbers[rng.integers(len(numbers))]
        raw = later[number.name].to_numpy(dtype=float) * rng.uniform(0.6, 1.4, size=len(later))
        later[number.name] = shape_number(number, raw)
    stamp = table.stamp
    assert stamp is not None
    later[stamp.name] = [
        (dt.date.fromisoformat(day) + dt.timedelta(days=int(lag))).isoformat()
        for day, lag in zip(later[stamp.name], rng.integers(1, 31, size=len(later)), strict=True)
    ]
    return insert_after(rng, frame, later, sources).iloc[::-1].reset_index(drop=True)


def add_duplicates(rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """One to four rows exported twice."""
    count = min(len(frame), int(rng.integers(1, 5)))
    sources = np.sort(rng.choice(len(frame), size=count, replace=False))
    return insert_after(rng, frame, frame.iloc[sources], sources)


def spell_number(value: Any, number: Number, style: str) -> str | None:
    """A number as a person types it: ``$1,234.50``, ``12%``, ``1,234`` or plain."""
    if isinstance(value, str):
        return value
    if pd.isna(value):
        return None
    digits = f"{value:,.{number.decimals}f}" if style != "plain" else f"{value:.{number.decimals}f}"
    return {"money": f"${digits}", "percent": f"{digits}%"}.get(style, digits)


def write_numbers_as_text(
    rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str
) -> pd.DataFrame:
    number = table.column(column)
    style = number.unit or "thousands"
    frame[column] = [spell_number(value, number, style) for value in frame[column]]
    return frame


def add_na_tokens(rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``N/A``, ``-`` or an empty string in a share of a number column's rows (one token per column,
    sometimes a mix); the other numbers become text as the file would hold them."""
    number = table.column(column)
    values = [spell_number(value, number, "plain") for value in frame[column]]
    tokens = NA_TOKENS if rng.random() < 0.3 else (NA_TOKENS[rng.integers(len(NA_TOKENS))],)
    for row in some_rows(rng, len(values), 0.05, 0.15):
        values[row] = tokens[rng.integers(len(tokens))]
    frame[column] = values
    return frame


def add_missing(rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Gaps (NaN or None) in a share of a category's or a number's rows."""
    rows = some_rows(rng, len(frame), 0.05, 0.15)
    if pd.api.types.is_numeric_dtype(frame[column]):
        values = frame[column].to_numpy(dtype=float, copy=True)
        values[rows] = np.nan
    else:
        values = frame[column].astype(object).to_numpy(copy=True)
        values[rows] = None
    frame[column] = values
    return frame


def vary_case(rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``shipped`` and ``SHIPPED`` next to ``Shipped`` in a share of a category's rows."""
    values = frame[column].astype(object).tolist()
    for row in some_rows(rng, len(values), 0.15, 0.4):
        value = values[row]
        if isinstance(value, str):
            variants = [v for v in dict.fromkeys((value.lower(), value.upper(), value.title())) if v != value]
            if variants:
                values[row] = variants[rng.integers(len(variants))]
    frame[column] = values
    return frame


def add_stray_spaces(
    rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str
) -> pd.DataFrame:
    """Leading or trailing blanks on a share of a text column's values."""
    values = frame[column].astype(object).tolist()
    for row in some_rows(rng, len(values), 0.1, 0.35):
        if isinstance(values[row], str):
            before, after = PADS[rng.integers(len(PADS))]
            values[row] = f"{before}{values[row]}{after}"
    frame[column] = values
    return frame


def format_date(day: dt.date, fmt: str) -> str:
    """``strftime`` with English month and day names whatever the locale."""
    return day.strftime(fmt.replace("%a", WEEKDAYS[day.weekday()]).replace("%b", MONTHS[day.month - 1]))


def write_dates_locally(
    rng: np.random.Generator, table: Table, frame: pd.DataFrame, column: str
) -> pd.DataFrame:
    """A date column in one local, non-ISO format."""
    fmt = DATE_FORMATS[rng.integers(len(DATE_FORMATS))]
    frame[column] = [
        format_date(dt.date.fromisoformat(value), fmt) if isinstance(value, str) else value
        for value in frame[column]
    ]
    return frame


def textual(frame: pd.DataFrame, column: str) -> bool:
    return not pd.api.types.is_numeric_dtype(frame[column])


DIRT: tuple[Dirt, ...] = (  # in the order they apply: versions on clean values, exact copies last
    Dirt(
        "versions",
        lambda table, frame: [table.row_key.name] if table.stamp and table.of(Category) else [],
        add_versions,
        CHANGE_LOG_SHARE,
    ),
    Dirt(
        "number_text",
        lambda table, frame: [
            number.name for number in table.of(Number) if number.unit or frame[number.name].max() >= 1_000
        ],
        write_numbers_as_text,
    ),
    Dirt("na_tokens", lambda table, frame: [number.name for number in table.of(Number)], add_na_tokens),
    Dirt("missing", lambda table, frame: [column.name for column in table.of(Category, Number)], add_missing),
    Dirt("case_variants", lambda table, frame: [column.name for column in table.of(Category)], vary_case),
    Dirt(
        "stray_spaces",
        lambda table, frame: [
            column.name for column in table.of(Category, Text, Key, Ref) if textual(frame, column.name)
        ],
        add_stray_spaces,
    ),
    Dirt(
        "date_text",
        lambda table, frame: [column.name for column in table.of(Date, Stamp)],
        write_dates_locally,
    ),
    Dirt("duplicates", lambda table, frame: [table.row_key.name], add_duplicates),
)
