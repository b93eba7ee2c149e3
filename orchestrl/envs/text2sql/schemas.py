"""The domains the Text2SQL env asks about: tables, columns, and how their rows are generated.

A :class:`Schema` is pure data. :mod:`.database` turns it into rows and a SQLite file, and
:mod:`.questions` reads the column *roles* to decide which questions make sense for a table:

- ``key``: the integer primary key ``id``; never asked about.
- ``fk``: a foreign key to the other table's ``id``; used only to join.
- ``label``: the human-readable name of a row (a product's name); what "list the ..." returns.
- ``category``: text with a handful of distinct values; filtered with ``=``/``!=`` and grouped by.
- ``number``: an ``INTEGER`` or ``REAL`` measure; aggregated, compared, sorted.

Identifiers are snake_case and their words are the tokens a policy reads (``ticket_price`` ->
``ticket price``), so a policy that links question words to schema words can carry over to a schema
it never trained on. ``phrase`` is what questions call the column and sometimes differs from its
name (``years_experience`` is asked about as "experience"), as in real text-to-SQL data.
Values are letters, digits and single spaces only, at most three words, so that a value can be
copied from the question as a span of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

SqlType = Literal["TEXT", "INTEGER", "REAL"]
Role = Literal["key", "fk", "label", "category", "number"]


@dataclass(frozen=True)
class Pick:
    """A categorical value drawn uniformly from ``pool``."""

    pool: tuple[str, ...]


@dataclass(frozen=True)
class Combo:
    """A unique name made of one word from each pool ("Nova" + "Kettle")."""

    first: tuple[str, ...]
    second: tuple[str, ...]


@dataclass(frozen=True)
class Span:
    """A number drawn uniformly from [lo, hi]; ``decimals`` > 0 makes it a REAL."""

    lo: float
    hi: float
    decimals: int = 0


ValueSpec = Pick | Combo | Span | None


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: SqlType
    role: Role
    values: ValueSpec = None
    phrase: str = ""
    additive: bool = True
    """Whether a SUM over the column means something (a total price does, a total year does not)."""

    @property
    def words(self) -> tuple[str, ...]:
        """The column's name as tokens: ``ticket_price`` -> ("ticket", "price")."""
        return tuple(self.name.split("_"))

    @property
    def say(self) -> str:
        """How questions call the column."""
        return self.phrase or " ".join(self.words)

    @property
    def numeric(self) -> bool:
        return self.sql_type != "TEXT"


@dataclass(frozen=True)
class Table:
    name: str
    singular: str
    plural: str
    rows: int
    columns: tuple[Column, ...]

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.name.split("_"))

    def with_role(self, *roles: Role) -> list[Column]:
        return [c for c in self.columns if c.role in roles]

    @property
    def label(self) -> Column | None:
        labels = self.with_role("label")
        return labels[0] if labels else None


@dataclass(frozen=True)
class ForeignKey:
    """``child.column`` references ``parent.id``."""

    child: str
    column: str
    parent: str


@dataclass(frozen=True)
class Schema:
    name: str
    tables: tuple[Table, ...]
    foreign_key: ForeignKey | None = None
    _by_name: dict[str, Table] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {t.name: t for t in self.tables})

    def table(self, name: str) -> Table:
        return self._by_name[name]

    def table_index(self, name: str) -> int:
        return [t.name for t in self.tables].index(name)

    @property
    def columns(self) -> list[tuple[Table, Column]]:
        """Every column in schema order: the order of the env's column slots 1..n (slot 0 is ``*``)."""
        return [(t, c) for t in self.tables for c in t.columns]

    def column_slot(self, table: str, column: str) -> int:
        """1-based position of ``table.column`` among :attr:`columns`."""
        for i, (t, c) in enumerate(self.columns, start=1):
            if t.name == table and c.name == column:
                return i
        raise KeyError(f"{self.name} has no column {table}.{column}")


def _key() -> Column:
    return Column("id", "INTEGER", "key")


def _fk(name: str) -> Column:
    return Column(name, "INTEGER", "fk")


def _label(name: str, first: tuple[str, ...], second: tuple[str, ...], phrase: str = "") -> Column:
    return Column(name, "TEXT", "label", Combo(first, second), phrase)


def _cat(name: str, pool: tuple[str, ...], phrase: str = "") -> Column:
    return Column(name, "TEXT", "category", Pick(pool), phrase)


def _int(name: str, lo: int, hi: int, phrase: str = "", additive: bool = True) -> Column:
    return Column(name, "INTEGER", "number", Span(lo, hi), phrase, additive)


def _real(name: str, lo: float, hi: float, phrase: str = "", additive: bool = True) -> Column:
    return Column(name, "REAL", "number", Span(lo, hi, decimals=2), phrase, additive)


def _pool(words: str) -> tuple[str, ...]:
    """``"New York, Paris"`` -> ("New York", "Paris"): keeps the value lists short to read."""
    return tuple(w.strip() for w in words.split(","))


_FIRST_NAMES = _pool(
    "Anna, Ben, Clara, David, Elena, Felix, Grace, Hugo, Ines, Jonas, "
    "Karin, Leo, Maya, Noah, Olga, Paul, Rosa, Sami, Tara, Victor"
)
_LAST_NAMES = _pool(
    "Schmidt, Garcia, Novak, Rossi, Okafor, Larsen, Dubois, Silva, "
    "Tanaka, Meyer, Kowalski, Haddad, Moreau, Jensen, Costa, Fischer"
)
_CITIES = _pool("Berlin, Paris, Madrid, Lisbon, Vienna, New York, Rio de Janeiro, Oslo, Tokyo, Cairo")


# fmt: off
SHOP = Schema(
    "shop",
    (
        Table("products", "product", "products", 24, (
            _key(),
            _label("name", _pool("Nova, Aurora, Zenith, Pixel, Terra, Lumen, Orbit, Cobalt"),
                   _pool("Lamp, Kettle, Chair, Speaker, Backpack, Blender, Monitor, Jacket")),
            _cat("category", _pool("Electronics, Kitchen, Furniture, Clothing, Outdoor")),
            _cat("brand", _pool("Acme, Globex, Initech, Umbrella, Hooli")),
            _real("price", 5, 400),
            _int("stock", 0, 250),
        )),
        Table("orders", "order", "orders", 70, (
            _key(),
            _fk("product_id"),
            _cat("city", _CITIES),
            _int("quantity", 1, 12),
            _int("order_year", 2018, 2024, phrase="year", additive=False),
        )),
    ),
    ForeignKey("orders", "product_id", "products"),
)

SCHOOL = Schema(
    "school",
    (
        Table("students", "student", "students", 30, (
            _key(),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("major", _pool("Physics, History, Biology, Economics, Art, Computer Science")),
            _cat("home_city", _CITIES, phrase="home city"),
            _int("age", 17, 30, additive=False),
            _real("gpa", 1.5, 4, phrase="grade point average", additive=False),
        )),
        Table("enrollments", "enrollment", "enrollments", 80, (
            _key(),
            _fk("student_id"),
            _cat("course", _pool("Algebra, Chemistry, Poetry, Statistics, Ethics, Geology")),
            _cat("semester", _pool("Spring, Summer, Autumn, Winter")),
            _int("score", 40, 100),
        )),
    ),
    ForeignKey("enrollments", "student_id", "students"),
)

HOSPITAL = Schema(
    "hospital",
    (
        Table("doctors", "doctor", "doctors", 18, (
            _key(),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("specialty", _pool("Cardiology, Neurology, Pediatrics, Oncology, Radiology")),
            _cat("ward", _pool("North, South, East, West")),
            _int("years_experience", 1, 35, phrase="experience", additive=False),
            _int("salary", 60000, 240000),
        )),
        Table("appointments", "appointment", "appointments", 75, (
            _key(),
            _fk("doctor_id"),
            _cat("weekday", _pool("Monday, Tuesday, Wednesday, Thursday, Friday")),
            _cat("patient_city", _CITIES, phrase="patient city"),
            _real("fee", 20, 300),
            _int("duration_minutes", 10, 90, phrase="duration"),
        )),
    ),
    ForeignKey("appointments", "doctor_id", "doctors"),
)

LIBRARY = Schema(
    "library",
    (
        Table("books", "book", "books", 28, (
            _key(),
            _label("title", _pool("Silent, Golden, Hidden, Broken, Endless, Crimson, Winter"),
                   _pool("River, Garden, Empire, Letters, Harbor, Machine, Forest")),
            _cat("genre", _pool("Mystery, Fantasy, Biography, Romance, Science Fiction")),
            _int("publication_year", 1950, 2023, phrase="publication year", additive=False),
            _int("pages", 90, 900),
        )),
        Table("loans", "loan", "loans", 80, (
            _key(),
            _fk("book_id"),
            _cat("branch", _pool("Central, Riverside, Hillcrest, Old Town")),
            _int("loan_days", 1, 60, phrase="loan days"),
        )),
    ),
    ForeignKey("loans", "book_id", "books"),
)

HR = Schema(
    "hr",
    (
        Table("departments", "department", "departments", 12, (
            _key(),
            _label("name", _pool("Global, Regional, Digital, Core"),
                   _pool("Finance, Marketing, Logistics, Research, Sales, Legal")),
            _cat("location", _CITIES),
            _int("budget", 100000, 5000000),
            _int("floor", 1, 20, additive=False),
        )),
        Table("employees", "employee", "employees", 60, (
            _key(),
            _fk("department_id"),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("job_title", _pool("Analyst, Manager, Engineer, Assistant, Director"), phrase="job"),
            _int("salary", 30000, 180000),
            _int("hire_year", 2001, 2024, phrase="hire year", additive=False),
        )),
    ),
    ForeignKey("employees", "department_id", "departments"),
)

MUSIC = Schema(
    "music",
    (
        Table("songs", "song", "songs", 40, (
            _key(),
            _label("title", _pool("Golden, Electric, Lonely, Midnight, Velvet, Neon, Paper"),
                   _pool("Echo, Heart, Highway, Dream, Rain, Summer, Moon")),
            _cat("genre", _pool("Jazz, Rock, Pop, Hip Hop, Classical, Folk")),
            _cat("label", _pool("Sunset Records, Blue Note, Atlas, Motown")),
            _int("release_year", 1965, 2024, phrase="release year", additive=False),
            _int("duration_seconds", 120, 480, phrase="duration"),
            _int("plays", 1000, 900000),
        )),
    ),
)

RESTAURANT = Schema(
    "restaurant",
    (
        Table("restaurants", "restaurant", "restaurants", 20, (
            _key(),
            _label("name", _pool("Blue, Golden, Rustic, Little, Royal, Green"),
                   _pool("Olive, Dragon, Table, Spoon, Garden, Lantern")),
            _cat("cuisine", _pool("Italian, Japanese, Mexican, Indian, French, Thai")),
            _cat("city", _CITIES),
            _real("rating", 2, 5, additive=False),
            _int("seats", 12, 180),
        )),
        Table("reviews", "review", "reviews", 80, (
            _key(),
            _fk("restaurant_id"),
            _cat(
                    "reviewer_country",
                    _pool("Germany, Spain, Brazil, Japan, Canada, Egypt"),
                    phrase="reviewer country",
                ),
            _int("stars", 1, 5),
            _int("visit_year", 2015, 2024, phrase="visit year", additive=False),
        )),
    ),
    ForeignKey("reviews", "restaurant_id", "restaurants"),
)

MOVIES = Schema(
    "movies",
    (
        Table("films", "film", "films", 40, (
            _key(),
            _label("title", _pool("Midnight, Last, Crimson, Iron, Silent, Frozen, Wild"),
                   _pool("Harbor, Frontier, Protocol, Kingdom, Voyage, Signal, Horizon")),
            _cat("genre", _pool("Drama, Comedy, Thriller, Animation, Documentary, Horror")),
            _cat("studio", _pool("Pinewood, Lumiere, Northstar, Redwood")),
            _int("release_year", 1970, 2024, phrase="release year", additive=False),
            _real("box_office", 0.5, 900, phrase="box office"),
            _int("runtime_minutes", 75, 190, phrase="runtime"),
        )),
    ),
)

FLIGHTS = Schema(
    "flights",
    (
        Table("airlines", "airline", "airlines", 10, (
            _key(),
            _label("name", _pool("Sky, Blue, Star, Polar, Sun"), _pool("Air, Airways, Jet, Wings")),
            _cat("country", _pool("Germany, Brazil, Japan, Canada, Kenya, Norway")),
            _int("fleet_size", 5, 300, phrase="fleet size"),
        )),
        Table("flights", "flight", "flights", 80, (
            _key(),
            _fk("airline_id"),
            _cat("origin", _CITIES),
            _cat("destination", _CITIES),
            _int("distance_km", 200, 12000, phrase="distance"),
            _real("ticket_price", 40, 1500, phrase="ticket price"),
        )),
    ),
    ForeignKey("flights", "airline_id", "airlines"),
)

REAL_ESTATE = Schema(
    "real_estate",
    (
        Table("houses", "house", "houses", 40, (
            _key(),
            _label("listing_name", _pool("Sunny, Maple, Cedar, Harbor, Quiet, Grand, Ivy"),
                   _pool("Cottage, Villa, Loft, Townhouse, Bungalow, Manor"), phrase="listing name"),
            _cat("district", _pool("Old Town, Riverside, Uptown, Harbor View, Green Hills")),
            _cat("property_type", _pool("Apartment, Detached, Terraced, Duplex"), phrase="property type"),
            _int("bedrooms", 1, 6),
            _int("asking_price", 90000, 1900000, phrase="asking price"),
            _int("build_year", 1900, 2023, phrase="build year", additive=False),
        )),
    ),
)

ZOO = Schema(
    "zoo",
    (
        Table("enclosures", "enclosure", "enclosures", 12, (
            _key(),
            _label("name", _pool("North, South, Great, Misty, Sunny"),
                   _pool("Savanna, Jungle, Reef, Tundra, Canyon")),
            _cat("habitat", _pool("Grassland, Rainforest, Aquatic, Arctic, Desert")),
            _int("area_sqm", 200, 20000, phrase="area"),
        )),
        Table("animals", "animal", "animals", 36, (
            _key(),
            _fk("enclosure_id"),
            _label("name", _pool("Kiki, Bruno, Luna, Mango, Zara, Otto, Pepper, Nala, Rocky, Daisy"),
                   _pool("Junior, Senior, Star, Blue")),
            _cat("species", _pool("Lion, Penguin, Giraffe, Zebra, Otter, Tiger, Flamingo")),
            _cat("diet", _pool("Carnivore, Herbivore, Omnivore")),
            _int("age", 1, 30, additive=False),
            _real("weight_kg", 2, 1200, phrase="weight"),
        )),
    ),
    ForeignKey("animals", "enclosure_id", "enclosures"),
)
# fmt: on

SCHEMAS: dict[str, Schema] = {
    s.name: s
    for s in (SHOP, SCHOOL, HOSPITAL, LIBRARY, HR, MUSIC, RESTAURANT, MOVIES, FLIGHTS, REAL_ESTATE, ZOO)
}

SPLIT_SCHEMAS: dict[str, tuple[str, ...]] = {
    "train": ("shop", "school", "hospital", "library", "hr", "music"),
    "validation": ("restaurant", "movies"),
    "test": ("flights", "real_estate", "zoo"),
}
"""Whole schemas per split: validation and test schemas (their table and column names) are never
seen in training. Validation uses the training phrasings; test adds held-out phrasings too."""

SPLITS: tuple[str, ...] = tuple(SPLIT_SCHEMAS)
