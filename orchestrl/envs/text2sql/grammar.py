"""The training grammar: questions as people write them, composed from paraphrase families.

A question is a kind's template (:data:`TrainGrammar.KIND_TEMPLATES`) whose slots are filled by
smaller families, each with many phrasings: the table's noun (plural, singular, an alias), a column's
noun (its phrase or an alias), the condition (with a column cue or without one: "whose city is
Berlin", "in Berlin", "Kitchen products", "engineers"), comparatives ("more than", "over", "above",
"at least", "fewer than", "older than", "that cost over"), superlatives in any position ("the
cheapest product", "which product is the most expensive", "the product with the highest price"),
aggregates ("average", "mean", "total", "combined"), and the answer's head ("names of", "which",
"list", "show"). Values appear as stored, in lower case, or as a plural noun; large numbers with
or without thousands separators.

Templates use a small notation (:func:`expand`): ``{a|b|c}`` is a choice (``{|a}``: optional),
``{NAME}`` a slot, nesting allowed. The test split's other half comes from :mod:`.grammar_heldout`,
written separately and never used in training.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from orchestrl.envs.text2sql.query import Agg, Op, Order
from orchestrl.envs.text2sql.questions import VALUE_MARK, Condition, Slots
from orchestrl.envs.text2sql.schemas import Column, Degrees, Table
from orchestrl.envs.text2sql.tokenizer import plural

V = VALUE_MARK
_SLOT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}


def expand(template: str, fills: dict[str, str], rng: np.random.Generator) -> str:
    """``template`` with every ``{a|b}`` choice made and every ``{NAME}`` slot filled."""
    out: list[str] = []
    i = 0
    while i < len(template):
        if template[i] != "{":
            out.append(template[i])
            i += 1
            continue
        depth, j = 0, i
        while True:
            depth += {"{": 1, "}": -1}.get(template[j], 0)
            if depth == 0:
                break
            j += 1
        inner = template[i + 1 : j]
        if _SLOT.match(inner):
            out.append(expand(fills[inner], fills, rng) if "{" in fills[inner] else fills[inner])
        else:
            options = _split_top(inner)
            out.append(expand(options[int(rng.integers(len(options)))], fills, rng))
        i = j + 1
    return "".join(out)


def _split_top(inner: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(inner):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "|" and depth == 0:
            parts.append(inner[start:k])
            start = k + 1
    parts.append(inner[start:])
    return parts


def tidy(text: str) -> str:
    """Single spaces, no space before punctuation, "a" -> "an" before a vowel."""
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([?.,:!])", r"\1", text)
    return re.sub(r"\b([Aa]) (?=[aeiouAEIOU])", r"\1n ", text)


def choose(rng: np.random.Generator, options: Sequence[str]) -> str:
    return options[int(rng.integers(len(options)))]


def alt(options: Sequence[str]) -> str:
    """Options (themselves templates) as one ``{a|b}`` choice."""
    return "{" + "|".join(options) + "}" if len(options) > 1 else options[0]


# -- the lexicon, read the same way by both grammars ---------------------------------------------
def table_nouns(table: Table) -> list[str]:
    return [table.plural, table.plural, *table.aliases]


def column_nouns(column: Column) -> list[str]:
    return [column.say, column.say, *column.lex.aliases]


def surface_value(cond: Condition, rng: np.random.Generator, as_noun: bool = False) -> str:
    """How the question writes the condition's value (see the module docstring)."""
    value = cond.value
    if cond.column.numeric:
        if len(value) >= 5 and value.isdigit() and rng.random() < 0.3:
            return f"{int(value):,}"
        return value
    if as_noun:
        words = value.split()
        value = " ".join([*words[:-1], plural(words[-1])])
    return value.lower() if rng.random() < 0.3 else value


def noun_fills(s: Slots) -> dict[str, str]:
    """The slots every grammar fills the same way: the nouns of the tables, columns and ``k``."""
    t = s.table
    fills = {"T": alt(table_nouns(t)), "t": t.singular, "k": alt([str(s.k), NUMBER_WORDS.get(s.k, str(s.k))])}
    if t.label is not None:
        fills["Ls"] = alt([plural(t.label.say), t.label.say])
    if s.parent is not None:
        fills["P"] = alt(table_nouns(s.parent))
        fills["p"] = s.parent.singular
        if s.parent.label is not None:
            fills["PLs"] = alt([plural(s.parent.label.say), s.parent.label.say])
    if s.number is not None:
        fills["N"] = alt(column_nouns(s.number))
    if s.category is not None:
        fills["C"] = alt(column_nouns(s.category))
        fills["Cs"] = alt([plural(n) for n in column_nouns(s.category)])
    return fills


def degrees(column: Column, order: Order) -> tuple[Degrees, ...]:
    return column.lex.more if order == Order.DESC else column.lex.less


def is_year(column: Column) -> bool:
    return "year" in column.words


def participle(column: Column) -> str:
    """ "were built" -> "built" (a passive verb read as a participle); "" otherwise."""
    verb = column.lex.verb
    return verb.split(" ", 1)[1] if verb.startswith("were ") else ""


def active_verb(column: Column) -> str:
    """ "cost", "weigh" (plural present); "" for a passive verb or none."""
    verb = column.lex.verb
    return "" if not verb or verb.startswith("were ") else verb


class TrainGrammar:
    """The grammar training (and validation) questions are phrased in."""

    name = "train"

    AGG_WORDS: ClassVar[dict] = {
        Agg.AVG: ("average", "mean", "avg"),
        Agg.SUM: ("total", "combined", "summed", "overall"),
        Agg.MIN: ("minimum", "lowest", "smallest", "min"),
        Agg.MAX: ("maximum", "highest", "largest", "max", "biggest"),
    }
    EXTREME: ClassVar[dict] = {
        Order.DESC: ("highest", "largest", "greatest", "biggest", "top", "maximum"),
        Order.ASC: ("lowest", "smallest", "least", "minimum"),
    }
    MOST: ClassVar[dict] = {
        Order.DESC: ("most", "largest number of", "highest number of", "greatest number of"),
        Order.ASC: ("fewest", "least", "smallest number of", "lowest number of"),
    }
    COMMON: ClassVar[dict] = {
        Order.DESC: ("most common", "most frequent", "most popular"),
        Order.ASC: ("least common", "rarest", "least frequent"),
    }
    DIRECTION: ClassVar[dict] = {
        Order.ASC: (
            "in ascending order",
            "from lowest to highest",
            "from smallest to largest",
            "lowest first",
            "smallest first",
            "ascending",
            "in increasing order",
        ),
        Order.DESC: (
            "in descending order",
            "from highest to lowest",
            "from largest to smallest",
            "highest first",
            "largest first",
            "descending",
            "in decreasing order",
        ),
    }
    LIST: ClassVar[tuple[str, ...]] = (
        "List",
        "Show",
        "Give me",
        "Name",
        "Find",
        "Return",
        "Get",
        "Tell me",
        "Display",
    )
    PER: ClassVar[tuple[str, ...]] = (
        "for each",
        "per",
        "in each",
        "by",
        "for every",
        "grouped by",
        "broken down by",
    )

    KIND_TEMPLATES: ClassVar[dict[str, tuple[str, ...]]] = {
        "list_where": (
            "{LIST} the {Ls} of {TC}{.|}",
            "{LIST} {the|all|all the|} {TC}{.|}",
            "What are the {Ls} of {the|} {TC}?",
            "Which {T} {PRED}?",
            "{Ls} of {TC}",
            "Which {T} {are there|exist|do we have} {COND}?",
            "I need the {Ls} of {TC}.",
            "Can you list the {TC}?",
            "{TC}: {list|show} their {Ls}{.|}",
            "Who are the {TC}?",
        ),
        "star_where": (
            "Show {all|} {the|} {DETAILS} {of|about|for|on} {the|} {TC}{.|}",
            "Show me everything about {the|} {TC}{.|}",
            "{Give|Return|Display} the full {records|rows|details} of {TC}{.|}",
            "All {info|details|columns} {for|on|about} {TC}",
            "What do we know about {the|} {TC}?",
            "Display {TC} with all their {columns|fields|details}{.|}",
            "{LIST} every column of {the|} {TC}{.|}",
        ),
        "count_all": (
            "How many {T} are there{?|}",
            "How many {T} {do we have|exist|are listed|are in the database|are recorded}{?|}",
            "{Count|Count all|Count the} {T}{.|}",
            "{Number|Total number|The number|Count} of {T}{?|}",
            "What is the {total|} number of {T}?",
            "How many {T} {in total|altogether|overall}?",
            "What's the count of {T}?",
        ),
        "count_where": (
            "How many {TC} are there{?|}",
            "How many {T} {PRED}{?|}",
            "{Count|Count the|Count all} {TC}{.|}",
            "{Number|The number|Total number} of {TC}{?|}",
            "What is the number of {TC}?",
            "How many {TC} {do we have|exist|are listed}{?|}",
            "{TC}: how many are there?",
            "How many of the {T} {PRED}?",
        ),
        "agg_all": (
            "What is the {AGG} {N} of {all|} {the|} {T}?",
            "What's the {AGG} {N}{?|}",
            "{AGG} {N} {of|across|over|for} {all|} {the|} {T}{?|}",
            "Find the {AGG} {N} {of|across|among} {the|} {T}{.|}",
            "{Compute|Calculate|Give me|Show} the {AGG} {N}{.|}",
            "Across all {T}, what is the {AGG} {N}?",
            "{AGGPHRASE}",
        ),
        "agg_where": (
            "What is the {AGG} {N} of {the|} {TC}?",
            "{AGG} {N} {of|for|among} {the|} {TC}{?|}",
            "Find the {AGG} {N} {of|for|among} {TC}{.|}",
            "For {TC}, what is the {AGG} {N}?",
            "What's the {AGG} {N} {for|of|among} {TC}?",
            "Among {TC}, {what is|what's|give} the {AGG} {N}{?|}",
            "{AGGPHRASE}",
        ),
        "group_count": (
            "How many {T} are there {PER} {C}?",
            "{Count|Count the} {T} {PER} {C}{.|}",
            "{Number|The number|Count} of {T} {PER} {C}{?|}",
            "For each {C}, how many {T} are there?",
            "{T} {per|by} {C}{?|}",
            "Show {the number of|how many} {T} {PER} {C}{.|}",
            "How many {T} does each {C} have?",
            "{Break down|Split} the {T} by {C}{.|}",
        ),
        "group_agg": (
            "What is the {AGG} {N} {PER} {C}?",
            "{AGG} {N} of {T} {PER} {C}{?|}",
            "For each {C}, what is the {AGG} {N}?",
            "{Show|Give|Compute} the {AGG} {N} {PER} {C}{.|}",
            "{AGG} {N} {by|per} {C}",
            "What's the {AGG} {N} of the {T} {PER} {C}?",
        ),
        "superlative": (
            "Which {t} has the {EXT} {N}?",
            "What is the {L} of the {t} with the {EXT} {N}?",
            "{LIST} the {t} with the {EXT} {N}{.|}",
            "The {t} with the {EXT} {N}{?|}",
            "{SUPQ}",
            "{SUPQ}",
            "{SUPQ}",
        ),
        "top_k": (
            "{LIST} the {k} {T} with the {EXT} {N}{.|}",
            "Which {k} {T} have the {EXT} {N}?",
            "{TOPBY}",
            "What are the {k} {T} with the {EXT} {N}?",
            "{TOPK}",
            "{TOPK}",
        ),
        "sorted_list": (
            "{LIST} {all|} the {T} {sorted|ordered} by {N} {DIR}{.|}",
            "{LIST} the {Ls} of {all|} {the|} {T} {sorted|ordered} by {N} {DIR}{.|}",
            "Sort the {T} by {N} {DIR}{.|}",
            "{T} {sorted|ordered|ranked} by {N}, {DIR}",
            "{SORTQ}",
        ),
        "group_argmax": (
            "Which {C} has the {MOST} {T}?",
            "{Find|Show|Give me} the {C} with the {MOST} {T}{.|}",
            "What is the {COMMON} {C}{?|}",
            "The {COMMON} {C} {among|of|for} {the|} {T}{?|}",
            "Which {C} {appears|occurs|shows up} {MOSTOFTEN}{?|}",
            "Which {C} do the {MOST} {T} have?",
            "The {C} with the {MOST} {T}{?|}",
        ),
        "where_superlative": (
            "Which {t} {CONDSG} has the {EXT} {N}?",
            "What is the {L} of the {t} {CONDSG} with the {EXT} {N}?",
            "Among {the|} {TC}, which has the {EXT} {N}?",
            "{SUPCOND}",
            "{SUPCOND}",
            "Of {all|} {the|} {TC}, which {one|} has the {EXT} {N}?",
        ),
        "join_count": (
            "How many {T} {belong to|are for|are linked to|are from|are of} {PC}?",
            "{Count|Count the} {T} of {PC}{.|}",
            "{Number|The number} of {T} {for|of} {PC}{?|}",
            "How many {T} do {PC} have?",
            "How many {T} are there for {PC}?",
        ),
        "join_list": (
            "{LIST} the {PLs} of {P} {that have|with} {TC}{.|}",
            "Which {P} have {TC}?",
            "{P} with {TC}{?|}",
            "What are the {PLs} of {the|} {P} with {TC}?",
            "Which {P} {are there|appear} {with|for} {TC}?",
        ),
        "join_agg": (
            "What is the {AGG} {N} of {the|} {T} {for|of} {PC}?",
            "{AGG} {N} of {T} {for|of} {PC}{?|}",
            "For {PC}, what is the {AGG} {N} of their {T}?",
            "Find the {AGG} {N} of the {T} of {PC}{.|}",
        ),
        "join_group": (
            "How many {T} are there {PER} {p} {C}?",
            "{Count|Count the} {T} {PER} {p} {C}{.|}",
            "{Number|The number} of {T} {PER} {p} {C}{?|}",
            "For each {p} {C}, how many {T} are there?",
            "How many {T} does each {p} {C} have?",
        ),
    }

    # -- the condition families --------------------------------------------------------------------
    def cue_conditions(self, cond: Condition, singular: bool) -> list[str]:
        """Post-nominal condition phrases ("whose price is over V", "in V")."""
        col, c, op = alt(column_nouns(cond.column)), cond.column, cond.op
        have = "that has" if singular else "that have"
        unit = f"{{ {c.lex.unit}|}}" if c.lex.unit else ""
        cues = [cue.replace("{v}", V) for cue in c.lex.cues]
        if not c.numeric:
            if op == Op.EQ:
                return [
                    f"whose {col} is {V}",
                    f"with {col} {V}",
                    f"where the {col} is {V}",
                    f"{have} {col} {V}",
                    f"with {{a|the}} {col} of {V}",
                    f"in the {V} {col}",
                    f"with {V} as {{their|its}} {col}",
                    *cues,
                    *cues,
                ]
            return [
                f"whose {col} is not {V}",
                f"with a {col} other than {V}",
                f"where the {col} is not {V}",
                f"not in the {V} {col}",
                f"outside the {V} {col}",
                *[f"not {cue}" for cue in cues],
            ]
        above = {
            Op.GT: "{more than|more than|more than|above|over|greater than|higher than|exceeding}",
            Op.LT: "{less than|less than|less than|below|under|lower than|smaller than}",
            Op.GE: "{at least|at least|no less than|not below}",
            Op.LE: "{at most|at most|no more than|not above|up to}",
            Op.EQ: "{exactly|equal to|}",
        }[op]
        phrases = [
            f"whose {col} is {above} {V}{unit}",
            f"with {{a|}} {col} {above} {V}{unit}",
            f"where the {col} is {above} {V}{unit}",
        ]
        if op == Op.GE:
            phrases += [
                f"with {{a|}} {col} of {V}{unit} or {{more|above|higher}}",
                f"whose {col} is {V} or more",
            ]
        if op == Op.LE:
            phrases += [
                f"with {{a|}} {col} of {V}{unit} or {{less|below|lower}}",
                f"whose {col} is {V} or less",
            ]
        if c.lex.counted:
            few = {
                Op.GT: "{more than|more than|over}",
                Op.LT: "{fewer than|fewer than|less than|under}",
                Op.GE: "at least",
                Op.LE: "{at most|at most|no more than|up to}",
                Op.EQ: "{exactly|}",
            }[op]
            phrases += [f"with {few} {V} {col}", f"{have} {few} {V} {col}"]
            if op in (Op.GE, Op.LE):
                phrases.append(f"with {V} or {'more' if op == Op.GE else 'fewer'} {col}")
        verb = active_verb(c)
        if verb:
            phrases += [f"that {verb} {above} {V}{unit}"]
        phrases += self._adjective_comparisons(cond, unit)
        part = participle(c)
        if is_year(c) and part and op != Op.EQ:
            when = {Op.GT: "after", Op.LT: "before", Op.GE: "in or after", Op.LE: "in or before"}[op]
            phrases += [f"{part} {when} {V}", f"{{that were|}} {part} {when} {V}"]
        return phrases

    def _adjective_comparisons(self, cond: Condition, unit: str) -> list[str]:
        if cond.op not in (Op.GT, Op.LT):
            return []
        order = Order.DESC if cond.op == Op.GT else Order.ASC
        return [f"{{that are|}} {d[1]} than {V}{unit}" for d in degrees(cond.column, order)]

    def predicates(self, cond: Condition) -> list[str]:
        """Verb phrases for a plural subject ("cost more than V", "are in V", "are engineers")."""
        c, op, col = cond.column, cond.op, alt(column_nouns(cond.column))
        preds = []
        if not c.numeric:
            negate = op == Op.NE
            cues = [cue.replace("{v}", V) for cue in c.lex.cues]
            if not negate:
                preds += [f"have {col} {V}", f"have a {col} of {V}", *[f"are {cue}" for cue in cues]]
                if c.lex.noun:
                    preds.append(f"are {V}")
            else:
                preds += [
                    f"do not have {col} {V}",
                    f"don't have {col} {V}",
                    *[f"are not {cue}" for cue in cues],
                ]
            return preds or [f"have {col} {V}"]
        above = {
            Op.GT: "{more than|more than|over|above}",
            Op.LT: "{less than|less than|under|below}",
            Op.GE: "at least",
            Op.LE: "{at most|at most|no more than|up to}",
            Op.EQ: "{exactly|}",
        }[op]
        unit = f"{{ {c.lex.unit}|}}" if c.lex.unit else ""
        preds.append(f"have {{a|}} {col} {above} {V}{unit}")
        if c.lex.counted:
            preds.append(f"have {above} {V} {col}")
        if active_verb(c):
            preds.append(f"{active_verb(c)} {above} {V}{unit}")
        preds += [f"are {p}" for p in self._adjective_comparisons(cond, unit) if not p.startswith("{that")]
        preds += [
            f"are {d[1]} than {V}{unit}"
            for d in degrees(c, Order.DESC if op == Op.GT else Order.ASC)
            if op in (Op.GT, Op.LT)
        ]
        part = participle(c)
        if is_year(c) and part and op in (Op.GT, Op.LT):
            preds.append(f"were {part} {'after' if op == Op.GT else 'before'} {V}")
        return preds

    def with_condition(self, table: Table, cond: Condition, rng: np.random.Generator) -> str:
        """A plural noun phrase for the rows the condition keeps ("products whose price is over V",
        "Kitchen products")."""
        c = cond.column
        if not c.numeric and cond.op == Op.EQ and c.lex.prefix and rng.random() < 0.35:
            return f"{V} {alt(table_nouns(table))}"
        return f"{alt(table_nouns(table))} {alt(self.cue_conditions(cond, singular=False))}"

    # -- the answer's head, aggregates and ranking -------------------------------------------------
    def aggregate_phrases(self, s: Slots) -> list[str]:
        """Whole questions for aggregates read through an adjective ("How old is the oldest student?")."""
        n, out = s.number, []
        if n is None:
            return out
        tc = "{TCS}" if s.cond else "{t}"
        if s.agg in (Agg.MAX, Agg.MIN):
            for d in degrees(n, Order.DESC if s.agg == Agg.MAX else Order.ASC):
                out += [f"How {d[0]} is the {d[2]} {tc}?", f"What is the {{N}} of the {d[2]} {tc}?"]
        if s.agg == Agg.SUM and n.lex.counted:
            out.append("How many {N} do {the|} {TCP} have {in total|altogether|combined}?")
        if s.agg == Agg.AVG:
            out.append("On average, what is the {N} of {the|} {TCP}?")
            if active_verb(n):
                out.append(f"How much do {{the|}} {{TCP}} {active_verb(n)} on average?")
        return out

    def superlative_phrases(self, s: Slots, with_cond: bool) -> list[str]:
        n = s.number
        assert n is not None
        head = "{LIST} the" if s.star else "{Which|What} is the"
        what = "{LIST} the" if s.star else "What is the {L} of the"
        sups = [d[2] for d in degrees(n, s.order)]
        out = []
        for sup in sups:
            if not with_cond:
                out += [
                    f"{head} {sup} {{t}}?",
                    f"Which {{t}} is the {sup}?",
                    f"{what} {sup} {{t}}?",
                    f"The {sup} {{t}}{{?|}}",
                    f"Name the {sup} {{t}}{{.|}}",
                    f"{sup} {{t}}",
                ]
            else:
                out += [
                    f"{head} {sup} {{t}} {{CONDSG}}?",
                    f"Which {{t}} {{CONDSG}} is the {sup}?",
                    f"{what} {sup} {{TCS}}?",
                    f"The {sup} {{TCS}}{{?|}}",
                    f"Among {{TC}}, which is the {sup}?",
                ]
        verb = active_verb(n)
        if verb:
            most = "the most" if s.order == Order.DESC else "the least"
            target = "{t} {CONDSG}" if with_cond else "{t}"
            out.append(f"Which {target} {verb}s {most}?")
        return out or [
            "Which {t} {CONDSG} has the {EXT} {N}?" if with_cond else "Which {t} has the {EXT} {N}?"
        ]

    def phrase(self, s: Slots, rng: np.random.Generator) -> tuple[str, str | None]:
        fills = self.fills(s, rng)
        surface = None
        if s.cond is not None:
            surface = self.condition_fills(s, fills, rng)
        else:
            fills["TCP"] = "{T}"
        templates = list(self.KIND_TEMPLATES[s.kind])
        if s.star:
            templates = [t for t in templates if "{L" not in t] or ["{LIST} the {t} with the {EXT} {N}."]
        text = expand(choose(rng, templates), fills, rng)
        if rng.random() < 0.15:
            text = text.lower()
        return tidy(text), surface

    def condition_fills(self, s: Slots, fills: dict[str, str], rng: np.random.Generator) -> str:
        """Fills the condition's slots (``TC``/``PC``, ``TCS``, ``CONDSG``, ``PRED``); returns how the
        value is written."""
        cond = s.cond
        assert cond is not None
        on_parent = s.kind in ("join_count", "join_agg")
        table = cond.table
        c = cond.column
        category_eq = not c.numeric and cond.op == Op.EQ
        fills["CONDSG"] = alt(self.cue_conditions(cond, singular=True))
        fills["COND"] = alt(self.cue_conditions(cond, singular=False))
        fills["PRED"] = alt(self.predicates(cond))
        if (
            s.kind == "where_superlative"
        ):  # a singular head: "the oldest penguin", "the cheapest Kitchen product"
            as_noun = category_eq and c.lex.noun and rng.random() < 0.35
            fills["TC"] = self.with_condition(table, cond, rng)
            if as_noun:
                fills["TCS"] = V
            elif category_eq and c.lex.prefix:
                fills["TCS"] = alt([f"{V} {table.singular}", f"{table.singular} {{CONDSG}}"])
            else:
                fills["TCS"] = f"{table.singular} {{CONDSG}}"
            return surface_value(cond, rng)
        as_noun = category_eq and c.lex.noun and rng.random() < 0.35
        phrase = V if as_noun else self.with_condition(table, cond, rng)
        fills["PC" if on_parent else "TC"] = phrase
        fills["TCP"] = phrase
        fills["TCS"] = V if as_noun else f"{table.singular} {{CONDSG}}"
        return surface_value(cond, rng, as_noun)

    def fills(self, s: Slots, rng: np.random.Generator) -> dict[str, str]:
        fills = noun_fills(s)
        fills.update(
            LIST=alt(self.LIST),
            DETAILS="{details|information|info|data|records|columns|fields}",
            PER=alt(self.PER),
        )
        if s.table.label is not None:
            fills["L"] = s.table.label.say
        if s.number is not None:
            fills["EXT"] = alt(self.EXTREME.get(s.order, ("highest",)))
        if s.agg in self.AGG_WORDS:
            fills["AGG"] = alt(self.AGG_WORDS[s.agg])
            phrases = self.aggregate_phrases(s)
            fallback = "What is the {AGG} {N} of {TC}?" if s.cond else "What is the {AGG} {N}?"
            fills["AGGPHRASE"] = alt(phrases) if phrases else fallback
        if s.order != Order.NONE:
            fills["DIR"] = alt(self.DIRECTION[s.order])
            fills["MOST"] = alt(self.MOST[s.order])
            fills["COMMON"] = alt(self.COMMON[s.order])
            fills["MOSTOFTEN"] = alt(
                ("most often", "most frequently")
                if s.order == Order.DESC
                else ("least often", "least frequently")
            )
        if s.kind in ("superlative", "where_superlative"):
            key = "SUPQ" if s.kind == "superlative" else "SUPCOND"
            fills[key] = alt(self.superlative_phrases(s, with_cond=s.cond is not None))
        if s.kind == "top_k" and s.number is not None:
            sups = [d[2] for d in degrees(s.number, s.order)]
            tops = [f"{{LIST}} the {{k}} {sup} {{T}}{{.|}}" for sup in sups]
            tops += [f"What are the {{k}} {sup} {{T}}?" for sup in sups]
            fills["TOPK"] = alt(tops or ["{LIST} the {k} {T} with the {EXT} {N}."])
            fills["TOPBY"] = (
                "{Top|The top|The best} {k} {T} by {N}{?|}"
                if s.order == Order.DESC
                else "{The bottom|The last} {k} {T} by {N}{?|}"
            )
        if s.kind == "sorted_list" and s.number is not None:
            ranks = []
            for high in degrees(s.number, Order.DESC):
                for low in degrees(s.number, Order.ASC):
                    a, b = (low[2], high[2]) if s.order == Order.ASC else (high[2], low[2])
                    ranks += [f"{{LIST}} the {{T}} from {a} to {b}{{.|}}", f"{{T}} from {a} to {b}"]
            fills["SORTQ"] = alt(ranks or ["{LIST} the {T} by {N} {DIR}."])
        return fills
