"""The domains the Text2SQL env asks about: tables, columns, how their rows are generated, and how
people talk about them.

A :class:`Schema` is pure data. :mod:`.database` turns it into rows and a SQLite file, and the
question grammars (:mod:`.grammar`, :mod:`.grammar_heldout`) read the column *roles* to decide which
questions make sense for a table:

- ``key``: the integer primary key ``id``; never asked about.
- ``fk``: a foreign key to the other table's ``id``; used only to join.
- ``label``: the human-readable name of a row (a product's name); what "list the ..." returns.
- ``category``: text with a handful of distinct values; filtered with ``=``/``!=`` and grouped by.
- ``number``: an ``INTEGER`` or ``REAL`` measure; aggregated, compared, sorted.

Identifiers are snake_case and their words are what a policy reads (``ticket_price`` -> ticket,
price), so a policy that links question words to schema words can carry over to a schema it never
trained on. ``phrase`` is what questions usually call the column, and a :class:`Lexicon` says how
else people talk about it ("the cheapest product", "animals that weigh over 500 kg", "flights to
Oslo"); only the grammars read it, never the observation. Values are letters, digits and single
spaces only, at most three words, so that a value can be copied from the question as a span.

Training, validation and test schemas are disjoint (:data:`SPLIT_SCHEMAS`): no table name of a
validation or test schema occurs in training.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from orchestrl.envs.text2sql.tokenizer import identifier_words

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
Degrees = tuple[str, str, str]
"""An adjective's base, comparative and superlative: ("old", "older", "oldest")."""


@dataclass(frozen=True)
class Lexicon:
    """How people talk about a column beyond its phrase (read by the question grammars only)."""

    aliases: tuple[str, ...] = ()
    """Other nouns for the column: ``price`` -> ("cost",)."""
    more: tuple[Degrees, ...] = ()
    """Adjectives for its high end: (("old", "older", "oldest"),) for an age."""
    less: tuple[Degrees, ...] = ()
    """Adjectives for its low end: (("cheap", "cheaper", "cheapest"),) for a price."""
    verb: str = ""
    """A verb whose object it is: "cost" (a price), "weigh" (a weight)."""
    unit: str = ""
    """Written after a number: "kg", "km", "minutes"."""
    counted: bool = False
    """The phrase counts things, so "with 3 bedrooms" means ``bedrooms = 3``."""
    cues: tuple[str, ...] = ()
    """Phrases that carry a value without naming the column: ("in {v}", "from {v}") for a city."""
    noun: bool = False
    """Values name the rows themselves: "penguins" = animals whose species is Penguin."""
    prefix: bool = False
    """A value can stand before the table's noun: "Mystery books", "Japanese restaurants"."""


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: SqlType
    role: Role
    values: ValueSpec = None
    phrase: str = ""
    additive: bool = True
    """Whether a SUM over the column means something (a total price does, a total year does not)."""
    lex: Lexicon = field(default_factory=Lexicon)

    @property
    def words(self) -> tuple[str, ...]:
        """The column's name as words: ``ticket_price`` -> ("ticket", "price")."""
        return tuple(identifier_words(self.name))

    @property
    def say(self) -> str:
        """How questions usually call the column."""
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
    aliases: tuple[str, ...] = ()
    """Other plural nouns for the rows: films -> ("movies",)."""

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(identifier_words(self.name))

    def with_role(self, *roles: Role) -> list[Column]:
        return [c for c in self.columns if c.role in roles]

    @property
    def label(self) -> Column | None:
        labels = self.with_role("label")
        return labels[0] if labels else None


@dataclass(frozen=True)
class ForeignKey:
    """``child.column`` references ``parent.parent_column`` (the parent's key)."""

    child: str
    column: str
    parent: str
    parent_column: str = "id"


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


def _label(
    name: str, first: tuple[str, ...], second: tuple[str, ...], phrase: str = "", **lex: object
) -> Column:
    return Column(name, "TEXT", "label", Combo(first, second), phrase, lex=Lexicon(**lex))


def _cat(name: str, pool: tuple[str, ...], phrase: str = "", **lex: object) -> Column:
    return Column(name, "TEXT", "category", Pick(pool), phrase, lex=Lexicon(**lex))


def _int(name: str, lo: int, hi: int, phrase: str = "", additive: bool = True, **lex: object) -> Column:
    return Column(name, "INTEGER", "number", Span(lo, hi), phrase, additive, lex=Lexicon(**lex))


def _real(name: str, lo: float, hi: float, phrase: str = "", additive: bool = True, **lex: object) -> Column:
    return Column(name, "REAL", "number", Span(lo, hi, decimals=2), phrase, additive, lex=Lexicon(**lex))


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
_IN_CITY = ("in {v}", "from {v}", "based in {v}")
_EXPENSIVE = ("expensive", "more expensive", "most expensive")
_CHEAP = ("cheap", "cheaper", "cheapest")
_PRICE = {
    "aliases": ("cost",),
    "more": (_EXPENSIVE, ("pricey", "pricier", "priciest")),
    "less": (_CHEAP,),
    "verb": "cost",
}
_OLD, _YOUNG, _NEW = ("old", "older", "oldest"), ("young", "younger", "youngest"), ("new", "newer", "newest")
_AGE = {"more": (_OLD,), "less": (_YOUNG,)}
_YEAR = {"more": (_NEW, ("recent", "more recent", "most recent")), "less": (_OLD,)}
_LONG, _SHORT = ("long", "longer", "longest"), ("short", "shorter", "shortest")
_LENGTH = {"more": (_LONG,), "less": (_SHORT,)}
_LARGE, _BIG, _SMALL = (
    ("large", "larger", "largest"),
    ("big", "bigger", "biggest"),
    ("small", "smaller", "smallest"),
)
_SIZE = {"more": (_LARGE, _BIG), "less": (_SMALL,)}
_HIGH, _LOW = ("high", "higher", "highest"), ("low", "lower", "lowest")
_GOOD, _BAD = ("good", "better", "best"), ("bad", "worse", "worst")
_WELL_PAID = ("well paid", "better paid", "best paid")
_POORLY_PAID = ("poorly paid", "worse paid", "worst paid")


# fmt: off
# -- training schemas ----------------------------------------------------------------------------
SHOP = Schema(
    "shop",
    (
        Table("products", "product", "products", 24, (
            _key(),
            _label("name", _pool("Nova, Aurora, Zenith, Pixel, Terra, Lumen, Orbit, Cobalt"),
                   _pool("Lamp, Kettle, Chair, Speaker, Backpack, Blender, Monitor, Jacket")),
            _cat("category", _pool("Electronics, Kitchen, Furniture, Clothing, Outdoor"), prefix=True),
            _cat("brand", _pool("Acme, Globex, Initech, Umbrella, Hooli"), cues=("by {v}", "made by {v}"),
                 prefix=True),
            _real("price", 5, 400, **_PRICE),
            _int("stock", 0, 250, aliases=("units in stock", "inventory"), counted=True),
        ), aliases=("items",)),
        Table("orders", "order", "orders", 70, (
            _key(),
            _fk("product_id"),
            _cat("city", _CITIES, cues=("shipped to {v}", "to {v}", "from {v}", "in {v}")),
            _int("quantity", 1, 12, aliases=("units", "amount"), counted=True),
            _int("order_year", 2018, 2024, phrase="year", additive=False, **_YEAR),
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
            _cat("major", _pool("Physics, History, Biology, Economics, Art, Computer Science"),
                 cues=("studying {v}", "majoring in {v}"), prefix=True),
            _cat("home_city", _CITIES, phrase="home city", cues=("from {v}",)),
            _int("age", 17, 30, additive=False, unit="years", **_AGE),
            _real("gpa", 1.5, 4, phrase="grade point average", additive=False, aliases=("gpa", "grades"),
                  more=(_GOOD,), less=(_BAD,)),
        ), aliases=("pupils",)),
        Table("enrollments", "enrollment", "enrollments", 80, (
            _key(),
            _fk("student_id"),
            _cat("course", _pool("Algebra, Chemistry, Poetry, Statistics, Ethics, Geology"),
                 cues=("in {v}", "for {v}")),
            _cat("semester", _pool("Spring, Summer, Autumn, Winter"), cues=("in {v}", "in the {v} semester")),
            _int("score", 40, 100, aliases=("grade", "mark"), more=(_HIGH,), less=(_LOW,)),
        ), aliases=("registrations",)),
    ),
    ForeignKey("enrollments", "student_id", "students"),
)

HOSPITAL = Schema(
    "hospital",
    (
        Table("doctors", "doctor", "doctors", 18, (
            _key(),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("specialty", _pool("Cardiology, Neurology, Pediatrics, Oncology, Radiology"),
                 cues=("in {v}", "working in {v}"), prefix=True),
            _cat("ward", _pool("North, South, East, West"), cues=("on the {v} ward", "in the {v} ward")),
            _int("years_experience", 1, 35, phrase="experience", additive=False, unit="years",
                 aliases=("years of experience",),
                 more=(("experienced", "more experienced", "most experienced"),),
                 less=(("inexperienced", "less experienced", "least experienced"),)),
            _int("salary", 60000, 240000, aliases=("pay", "income"), more=(_WELL_PAID,), verb="earn"),
        ), aliases=("physicians",)),
        Table("appointments", "appointment", "appointments", 75, (
            _key(),
            _fk("doctor_id"),
            _cat("weekday", _pool("Monday, Tuesday, Wednesday, Thursday, Friday"), phrase="day",
                 cues=("on {v}", "on a {v}")),
            _cat("patient_city", _CITIES, phrase="patient city", cues=("for patients from {v}",)),
            _real("fee", 20, 300, aliases=("price", "charge"), verb="cost", more=(_EXPENSIVE,),
                  less=(_CHEAP,)),
            _int("duration_minutes", 10, 90, phrase="duration", unit="minutes", aliases=("length",),
                 verb="last",
                 **_LENGTH),
        ), aliases=("visits",)),
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
            _cat("genre", _pool("Mystery, Fantasy, Biography, Romance, Science Fiction"), noun=True,
                 prefix=True),
            _int("publication_year", 1950, 2023, phrase="publication year", additive=False,
                 aliases=("year",), verb="were published", **_YEAR),
            _int("pages", 90, 900, aliases=("page count", "length"), counted=True, **_LENGTH),
        ), aliases=("titles", "novels")),
        Table("loans", "loan", "loans", 80, (
            _key(),
            _fk("book_id"),
            _cat("branch", _pool("Central, Riverside, Hillcrest, Old Town"),
                 cues=("at {v}", "at the {v} branch")),
            _int("loan_days", 1, 60, phrase="loan days", unit="days", aliases=("loan length", "duration"),
                 **_LENGTH),
        ), aliases=("checkouts",)),
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
            _cat("location", _CITIES, cues=_IN_CITY),
            _int("budget", 100000, 5000000, aliases=("funding",), more=(("rich", "richer", "richest"),),
                 less=(("poor", "poorer", "poorest"),)),
            _int("floor", 1, 20, additive=False, more=(_HIGH,), less=(_LOW,)),
        ), aliases=("teams", "units")),
        Table("employees", "employee", "employees", 60, (
            _key(),
            _fk("department_id"),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("job_title", _pool("Analyst, Manager, Engineer, Assistant, Director"), phrase="job",
                 aliases=("role", "position"), noun=True),
            _int("salary", 30000, 180000, aliases=("pay", "wage"), more=(_WELL_PAID,), less=(_POORLY_PAID,),
                 verb="earn"),
            _int("hire_year", 2001, 2024, phrase="hire year", additive=False, verb="were hired",
                 more=(_NEW,)),
        ), aliases=("staff", "workers", "people")),
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
            _cat("genre", _pool("Jazz, Rock, Pop, Hip Hop, Classical, Folk"), prefix=True),
            _cat("label", _pool("Sunset Records, Blue Note, Atlas, Motown"), phrase="record label",
                 cues=("on {v}", "released by {v}")),
            _int("release_year", 1965, 2024, phrase="release year", additive=False, verb="were released",
                 **_YEAR),
            _int("duration_seconds", 120, 480, phrase="duration", unit="seconds", aliases=("length",),
                 verb="last", **_LENGTH),
            _int("plays", 1000, 900000, aliases=("streams", "listens"), counted=True,
                 more=(("popular", "more popular", "most popular"),),
                 less=(("obscure", "more obscure", "most obscure"),)),
        ), aliases=("tracks", "tunes")),
    ),
)

CARS = Schema(
    "cars",
    (
        Table("dealers", "dealer", "dealers", 12, (
            _key(),
            _label("name", _pool("City, Prime, Star, Metro"), _pool("Motors, Autos, Cars, Garage")),
            _cat("city", _CITIES, cues=_IN_CITY),
            _real("rating", 1, 5, additive=False, more=(_GOOD,), less=(_BAD,)),
        ), aliases=("dealerships", "car dealers")),
        Table("cars", "car", "cars", 50, (
            _key(),
            _fk("dealer_id"),
            _label("model", _pool("Falcon, Comet, Vista, Ranger, Breeze, Titan, Nova, Rapid"),
                   _pool("GT, LX, Sport, Classic, Plus, Max, Eco")),
            _cat("make", _pool("Toyota, Ford, Volvo, Renault, Skoda, Hyundai"), phrase="brand", prefix=True,
                 cues=("made by {v}", "from {v}")),
            _cat("fuel_type", _pool("Petrol, Diesel, Electric, Hybrid"), phrase="fuel", prefix=True),
            _int("horsepower", 70, 450, aliases=("power",),
                 more=(("powerful", "more powerful", "most powerful"),),
                 less=(("weak", "weaker", "weakest"),)),
            _int("price", 8000, 95000, **_PRICE),
            _int("model_year", 2005, 2024, phrase="year", additive=False, **_YEAR),
        ), aliases=("vehicles",)),
    ),
    ForeignKey("cars", "dealer_id", "dealers"),
)

SPORTS = Schema(
    "sports",
    (
        Table("teams", "team", "teams", 12, (
            _key(),
            _label("name", _pool("Red, Iron, Royal, Storm, River, Golden"),
                   _pool("Lions, Rovers, United, Wolves")),
            _cat("home_city", _CITIES, phrase="city", cues=_IN_CITY),
            _int("founded_year", 1880, 2010, phrase="founding year", additive=False, verb="were founded",
                 more=(_YOUNG, _NEW), less=(_OLD,)),
            _int("stadium_capacity", 5000, 90000, phrase="stadium capacity", aliases=("capacity",),
                 more=(_BIG, _LARGE), less=(_SMALL,)),
        ), aliases=("clubs", "sides")),
        Table("players", "player", "players", 70, (
            _key(),
            _fk("team_id"),
            _label("name", _FIRST_NAMES, _LAST_NAMES),
            _cat("position", _pool("Goalkeeper, Defender, Midfielder, Forward"), noun=True),
            _cat("nationality", _pool("Brazil, Spain, France, Nigeria, Japan, Norway"), cues=("from {v}",)),
            _int("goals", 0, 40, counted=True, verb="scored"),
            _int("height_cm", 160, 205, phrase="height", unit="cm", additive=False,
                 more=(("tall", "taller", "tallest"),),
                 less=(_SHORT,)),
            _int("salary", 20000, 900000, aliases=("pay", "wage"), verb="earn",
                 more=(_WELL_PAID,), less=(_POORLY_PAID,)),
        ), aliases=("athletes",)),
    ),
    ForeignKey("players", "team_id", "teams"),
)

HOTELS = Schema(
    "hotels",
    (
        Table("hotels", "hotel", "hotels", 16, (
            _key(),
            _label("name", _pool("Grand, Royal, Seaside, Alpine, Park, Garden"),
                   _pool("Hotel, Inn, Lodge, Resort")),
            _cat("city", _CITIES, cues=_IN_CITY),
            _int("star_rating", 1, 5, phrase="stars", additive=False, counted=True),
            _int("rooms", 10, 400, counted=True, **_SIZE),
            _real("nightly_rate", 40, 600, phrase="nightly rate",
                  **{**_PRICE, "aliases": ("price", "room rate")}),
        )),
        Table("bookings", "booking", "bookings", 80, (
            _key(),
            _fk("hotel_id"),
            _cat("guest_country", _pool("Germany, Italy, Canada, India, Mexico, Australia"),
                 phrase="guest country", cues=("by guests from {v}", "from {v}")),
            _int("nights", 1, 21, counted=True, **_LENGTH),
            _int("booking_year", 2015, 2024, phrase="year", additive=False, **_YEAR),
        ), aliases=("reservations", "stays")),
    ),
    ForeignKey("bookings", "hotel_id", "hotels"),
)

CITIES = Schema(
    "cities",
    (
        Table("cities", "city", "cities", 30, (
            _key(),
            _label("name", _pool("Port, Lake, Mount, New, Fort, Saint"),
                   _pool("Aldor, Brena, Corvo, Dalen, Esker, Fallow, Garnet")),
            _cat("country", _pool("Chile, Finland, Ghana, Iceland, Peru, Poland, Vietnam"), cues=("in {v}",)),
            _cat("climate", _pool("Tropical, Temperate, Arid, Polar"), prefix=True),
            _int("population", 5000, 9000000, aliases=("inhabitants", "people"), counted=True,
                 **_SIZE),
            _real("area_km2", 5, 3000, phrase="area", unit="square kilometers", aliases=("size",),
                  **_SIZE),
            _int("elevation_m", 0, 4000, phrase="elevation", unit="meters", aliases=("altitude", "height"),
                 additive=False, more=(_HIGH,), less=(_LOW,)),
        ), aliases=("towns",)),
    ),
)

LOGISTICS = Schema(
    "logistics",
    (
        Table("couriers", "courier", "couriers", 10, (
            _key(),
            _label("name", _pool("Swift, Rapid, Metro, Prime, Arrow"),
                   _pool("Post, Express, Cargo, Freight")),
            _cat("country", _pool("Spain, Italy, Sweden, Egypt, Mexico, India"),
                 cues=("from {v}", "based in {v}")),
            _int("vans", 3, 200, counted=True, aliases=("delivery vans",), more=(_BIG, _LARGE),
                 less=(_SMALL,)),
        ), aliases=("delivery firms",)),
        Table("parcels", "parcel", "parcels", 80, (
            _key(),
            _fk("courier_id"),
            _cat("pickup_city", _CITIES, phrase="pickup city", aliases=("sending city",),
                 cues=("from {v}", "sent from {v}", "picked up in {v}", "coming from {v}")),
            _cat("delivery_city", _CITIES, phrase="delivery city", aliases=("receiving city",),
                 cues=("to {v}", "sent to {v}", "delivered to {v}", "headed for {v}")),
            _real("weight_kg", 0.2, 30, phrase="weight", unit="kg", verb="weigh",
                  more=(("heavy", "heavier", "heaviest"),), less=(("light", "lighter", "lightest"),)),
            _real("postage", 3, 120, aliases=("shipping cost",), more=(_EXPENSIVE,), less=(_CHEAP,),
                  verb="cost"),
        ), aliases=("packages", "shipments")),
    ),
    ForeignKey("parcels", "courier_id", "couriers"),
)

RAIL = Schema(
    "rail",
    (
        Table("trains", "train", "trains", 40, (
            _key(),
            _label("name", _pool("Coastal, Northern, Alpine, Capital, Night, Valley, Summit, Lakeside"),
                   _pool("Express, Sprinter, Runner, Line, Flyer")),
            _cat("departure_city", _CITIES, phrase="departure city", aliases=("starting city",),
                 cues=("from {v}", "departing {v}", "starting in {v}", "setting off from {v}")),
            _cat("arrival_city", _CITIES, phrase="arrival city", aliases=("final stop",),
                 cues=("to {v}", "going to {v}", "ending in {v}", "arriving at {v}")),
            _int("duration_minutes", 20, 600, phrase="journey time", unit="minutes", aliases=("duration",),
                 **_LENGTH),
            _real("fare", 5, 250, **{**_PRICE, "aliases": ("ticket cost", "price")}),
        ), aliases=("services", "train services")),
    ),
)

# -- validation schemas --------------------------------------------------------------------------
RESTAURANT = Schema(
    "restaurant",
    (
        Table("restaurants", "restaurant", "restaurants", 20, (
            _key(),
            _label("name", _pool("Blue, Golden, Rustic, Little, Royal, Green"),
                   _pool("Olive, Dragon, Table, Spoon, Garden, Lantern")),
            _cat("cuisine", _pool("Italian, Japanese, Mexican, Indian, French, Thai"), prefix=True),
            _cat("city", _CITIES, cues=_IN_CITY),
            _real("rating", 2, 5, additive=False, more=(_GOOD,), less=(_BAD,)),
            _int("seats", 12, 180, counted=True, more=(_BIG, _LARGE), less=(_SMALL,)),
        ), aliases=("places", "eateries")),
        Table("reviews", "review", "reviews", 80, (
            _key(),
            _fk("restaurant_id"),
            _cat(
                    "reviewer_country",
                    _pool("Germany, Spain, Brazil, Japan, Canada, Egypt"),
                    phrase="reviewer country",
                    cues=("from {v}", "by reviewers from {v}"),
                ),
            _int("stars", 1, 5, counted=True),
            _int("visit_year", 2015, 2024, phrase="visit year", additive=False, **_YEAR),
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
            _cat("genre", _pool("Drama, Comedy, Thriller, Animation, Documentary, Horror"), noun=True,
                 prefix=True),
            _cat("studio", _pool("Pinewood, Lumiere, Northstar, Redwood"), cues=("by {v}", "from {v}")),
            _int("release_year", 1970, 2024, phrase="release year", additive=False, verb="were released",
                 **_YEAR),
            _real("box_office", 0.5, 900, phrase="box office", aliases=("revenue", "earnings")),
            _int("runtime_minutes", 75, 190, phrase="runtime", unit="minutes", aliases=("length",),
                 **_LENGTH),
        ), aliases=("movies",)),
    ),
)

# -- test schemas --------------------------------------------------------------------------------
FLIGHTS = Schema(
    "flights",
    (
        Table("airlines", "airline", "airlines", 10, (
            _key(),
            _label("name", _pool("Sky, Blue, Star, Polar, Sun"), _pool("Air, Airways, Jet, Wings")),
            _cat("country", _pool("Germany, Brazil, Japan, Canada, Kenya, Norway"),
                 cues=("from {v}", "based in {v}")),
            _int("fleet_size", 5, 300, phrase="fleet size", aliases=("fleet", "number of planes"),
                 more=(_BIG, _LARGE), less=(_SMALL,)),
        ), aliases=("carriers",)),
        Table("flights", "flight", "flights", 80, (
            _key(),
            _fk("airline_id"),
            _cat("origin", _CITIES, cues=("from {v}", "leaving {v}", "departing from {v}")),
            _cat("destination", _CITIES, cues=("to {v}", "arriving in {v}", "bound for {v}")),
            _int("distance_km", 200, 12000, phrase="distance", unit="km", **_LENGTH),
            _real("ticket_price", 40, 1500, phrase="ticket price",
                  **{**_PRICE, "aliases": ("fare", "price")}),
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
            _cat("district", _pool("Old Town, Riverside, Uptown, Harbor View, Green Hills"),
                 cues=("in {v}",)),
            _cat("property_type", _pool("Apartment, Detached, Terraced, Duplex"), phrase="property type",
                 prefix=True),
            _int("bedrooms", 1, 6, counted=True),
            _int("asking_price", 90000, 1900000, phrase="asking price", **{**_PRICE, "aliases": ("price",)}),
            _int("build_year", 1900, 2023, phrase="build year", additive=False, verb="were built", **_YEAR),
        ), aliases=("homes", "properties")),
    ),
)

ZOO = Schema(
    "zoo",
    (
        Table("enclosures", "enclosure", "enclosures", 12, (
            _key(),
            _label("name", _pool("North, South, Great, Misty, Sunny"),
                   _pool("Savanna, Jungle, Reef, Tundra, Canyon")),
            _cat("habitat", _pool("Grassland, Rainforest, Aquatic, Arctic, Desert"), prefix=True),
            _int("area_sqm", 200, 20000, phrase="area", unit="square meters", aliases=("size",), **_SIZE),
        )),
        Table("animals", "animal", "animals", 36, (
            _key(),
            _fk("enclosure_id"),
            _label("name", _pool("Kiki, Bruno, Luna, Mango, Zara, Otto, Pepper, Nala, Rocky, Daisy"),
                   _pool("Junior, Senior, Star, Blue")),
            _cat("species", _pool("Lion, Penguin, Giraffe, Zebra, Otter, Tiger, Flamingo"), noun=True),
            _cat("diet", _pool("Carnivore, Herbivore, Omnivore"), noun=True),
            _int("age", 1, 30, additive=False, unit="years", **_AGE),
            _real("weight_kg", 2, 1200, phrase="weight", unit="kg", verb="weigh",
                  more=(("heavy", "heavier", "heaviest"),), less=(("light", "lighter", "lightest"),)),
        )),
    ),
    ForeignKey("animals", "enclosure_id", "enclosures"),
)
# fmt: on

SCHEMAS: dict[str, Schema] = {
    s.name: s
    for s in (
        SHOP, SCHOOL, HOSPITAL, LIBRARY, HR, MUSIC, CARS, SPORTS, HOTELS, CITIES, LOGISTICS, RAIL,
        RESTAURANT, MOVIES,
        FLIGHTS, REAL_ESTATE, ZOO,
    )
}  # fmt: skip

SPLIT_SCHEMAS: dict[str, tuple[str, ...]] = {
    "train": (
        "shop",
        "school",
        "hospital",
        "library",
        "hr",
        "music",
        "cars",
        "sports",
        "hotels",
        "cities",
        "logistics",
        "rail",
    ),
    "validation": ("restaurant", "movies"),
    "test": ("flights", "real_estate", "zoo"),
}
"""Whole schemas per split: validation and test schemas (their table and column names) are never
seen in training. Training questions come from the training grammar (:mod:`.grammar`); validation
questions too; test questions from the training grammar and from the held-out grammar
(:mod:`.grammar_heldout`), half each."""

SPLITS: tuple[str, ...] = tuple(SPLIT_SCHEMAS)
