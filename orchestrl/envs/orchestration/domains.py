"""The three business domains tasks are drawn from: shop, HR, logistics.

Each domain has one fact table (orders / timesheets / shipments) and two dimension tables it
references by name. Columns play fixed parts so the generator is domain-agnostic: a fact has an
id, two name keys, a status, a category, two numbers and an ingestion batch; a dimension has a
name key, two categories and a number. Clean text is lower case and trimmed; dirt is added later.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    table: str
    key: str
    first_words: tuple[str, ...]
    last_words: tuple[str, ...]
    cat: str
    cat_values: tuple[str, ...]
    cat2: str
    cat2_values: tuple[str, ...]
    num: str
    num_range: tuple[float, float]


@dataclass(frozen=True)
class Domain:
    name: str
    fact: str
    fact_id: str
    status: str
    status_values: tuple[str, ...]
    cat: str
    cat_values: tuple[str, ...]
    n1: str
    n1_range: tuple[float, float]
    n1_integer: bool
    n2: str
    n2_range: tuple[float, float]
    derived: str  # the domain's natural derived measure ...
    derived_op: str  # ... = left <op> right
    derived_left: str
    derived_right: str
    dims: tuple[Dimension, Dimension]
    distractors: tuple[str, str, str]  # text with gaps, free text, flag


SHOP = Domain(
    name="shop",
    fact="orders",
    fact_id="order_id",
    status="status",
    status_values=("placed", "shipped", "returned", "cancelled"),
    cat="channel",
    cat_values=("web", "store", "phone", "partner"),
    n1="qty",
    n1_range=(1, 12),
    n1_integer=True,
    n2="unit_price",
    n2_range=(2.0, 250.0),
    derived="revenue",
    derived_op="mul",
    derived_left="qty",
    derived_right="unit_price",
    dims=(
        Dimension(
            "customers",
            "customer",
            (
                "acme",
                "globex",
                "initech",
                "umbrella",
                "stark",
                "wayne",
                "wonka",
                "hooli",
                "vandelay",
                "soylent",
                "tyrell",
                "cyberdyne",
                "oscorp",
                "gringotts",
            ),
            ("corp", "ltd", "group", "traders", "partners"),
            "region",
            ("north", "south", "east", "west", "central"),
            "segment",
            ("retail", "business", "public"),
            "credit_limit",
            (500.0, 20000.0),
        ),
        Dimension(
            "products",
            "product",
            ("garden", "smart", "travel", "kitchen", "desk", "solar", "pocket", "studio"),
            ("hose", "lamp", "kit", "mug", "chair", "radio", "scale"),
            "category",
            ("toys", "books", "garden", "tools", "kitchen"),
            "supplier",
            ("northwind", "contoso", "fabrikam", "tailspin"),
            "weight_kg",
            (0.1, 30.0),
        ),
    ),
    distractors=("coupon_code", "note", "legacy_flag"),
)

HR = Domain(
    name="hr",
    fact="timesheets",
    fact_id="entry_id",
    status="approval",
    status_values=("approved", "pending", "rejected", "draft"),
    cat="activity",
    cat_values=("build", "meeting", "review", "support"),
    n1="hours",
    n1_range=(0.5, 10.0),
    n1_integer=False,
    n2="rate",
    n2_range=(20.0, 150.0),
    derived="cost",
    derived_op="mul",
    derived_left="hours",
    derived_right="rate",
    dims=(
        Dimension(
            "employees",
            "employee",
            ("ada", "grace", "alan", "edsger", "barbara", "donald", "frances", "ken", "radia", "tim"),
            ("lovelace", "hopper", "turing", "liskov", "knuth", "allen", "thompson", "perlman"),
            "department",
            ("engineering", "sales", "operations", "finance", "legal"),
            "grade",
            ("junior", "mid", "senior", "lead"),
            "salary",
            (30000.0, 160000.0),
        ),
        Dimension(
            "projects",
            "project",
            ("apollo", "gemini", "mercury", "artemis", "voyager", "pioneer", "viking"),
            ("migration", "portal", "audit", "platform", "rollout"),
            "client",
            ("bank", "retailer", "hospital", "city", "insurer"),
            "practice",
            ("data", "cloud", "security", "web"),
            "budget",
            (5000.0, 500000.0),
        ),
    ),
    distractors=("badge_code", "comment", "sync_flag"),
)

LOGISTICS = Domain(
    name="logistics",
    fact="shipments",
    fact_id="shipment_id",
    status="state",
    status_values=("delivered", "in transit", "lost", "returned"),
    cat="service",
    cat_values=("express", "standard", "economy", "freight"),
    n1="weight_kg",
    n1_range=(0.5, 80.0),
    n1_integer=False,
    n2="cost",
    n2_range=(5.0, 900.0),
    derived="cost_per_kg",
    derived_op="div",
    derived_left="cost",
    derived_right="weight_kg",
    dims=(
        Dimension(
            "warehouses",
            "warehouse",
            ("lyon", "leeds", "porto", "gdansk", "turin", "ghent", "malmo", "brno", "bilbao"),
            ("hub", "depot", "centre", "yard"),
            "zone",
            ("north", "south", "east", "west"),
            "size_class",
            ("compact", "regional", "national"),
            "floor_m2",
            (800.0, 40000.0),
        ),
        Dimension(
            "carriers",
            "carrier",
            ("swift", "blue", "rapid", "polar", "atlas", "orbit", "delta"),
            ("freight", "logistics", "express", "cargo"),
            "mode",
            ("road", "rail", "air", "sea"),
            "tier",
            ("gold", "silver", "bronze"),
            "rate_per_kg",
            (0.5, 9.0),
        ),
    ),
    distractors=("tracking_ref", "memo", "legacy_code"),
)

DOMAINS: tuple[Domain, ...] = (SHOP, HR, LOGISTICS)

# Target columns renamed by select stages get these names (else "<name>_out").
ALIASES = {
    "customer": "client",
    "region": "area",
    "product": "item",
    "revenue": "sales",
    "status": "state_name",
    "employee": "person",
    "department": "team",
    "cost": "spend",
    "warehouse": "site",
    "carrier": "shipper",
    "channel": "source_channel",
    "category": "product_group",
    "project": "engagement",
}
