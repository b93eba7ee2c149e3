"""The held-out grammar: a second, separately written grammar that only the test split uses.

Its phrasings are its own: fronted conditions ("Looking only at flights to Oslo, ..."), requests
("I'd like", "Could you", "Pull up"), comparatives training never uses ("beyond", "in excess of",
"north of", "short of", "and up", "or lower"), rankings ("ranks first by", "number one
by"), tallies and shares ("tally", "largest share of"), other aggregate words ("aggregate", "peak",
"minimal"). It reads the same schema lexicon and the same template notation as :mod:`.grammar`
(only its mechanics are shared), and no training or validation question is phrased in it, so
test questions in it measure wording never seen in training.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from orchestrl.envs.text2sql.grammar import (
    active_verb,
    alt,
    choose,
    column_nouns,
    degrees,
    expand,
    is_year,
    noun_fills,
    participle,
    surface_value,
    table_nouns,
    tidy,
)
from orchestrl.envs.text2sql.query import Agg, Op, Order
from orchestrl.envs.text2sql.questions import VALUE_MARK, Condition, Slots

V = VALUE_MARK


class HeldOutGrammar:
    """Phrases the held-out half of the test split (see the module docstring)."""

    name = "heldout"

    AGG_WORDS: ClassVar[dict] = {
        Agg.AVG: ("average", "mean", "typical average"),
        Agg.SUM: ("sum of the", "aggregate", "grand total", "total"),
        Agg.MIN: ("least", "minimal", "bottom", "lowest"),
        Agg.MAX: ("greatest", "peak", "maximal", "top"),
    }
    EXTREME: ClassVar[dict] = {
        Order.DESC: ("greatest", "top", "highest", "largest"),
        Order.ASC: ("bottom", "smallest", "lowest"),
    }
    DIRECTION: ClassVar[dict] = {
        Order.ASC: ("low to high", "smallest to largest", "in rising order", "beginning with the lowest"),
        Order.DESC: ("high to low", "largest to smallest", "in falling order", "beginning with the highest"),
    }
    ASK: ClassVar[tuple[str, ...]] = (
        "I'd like",
        "Could you give me",
        "Please give me",
        "I need",
        "Pull up",
        "Fetch",
    )
    EACH: ClassVar[tuple[str, ...]] = ("for every", "across each", "split by", "for each individual", "per")

    KIND_TEMPLATES: ClassVar[dict[str, tuple[str, ...]]] = {
        "list_where": (
            "{ASK} the {Ls} of {TC}.",
            "Could you name the {TC}?",
            "Which ones among the {T} {PRED}?",
            "{Ls} for every {t} {CONDSG}, please.",
            "Tell me which {T} {PRED}.",
            "{FRONT}, which {T} are there?",
        ),
        "star_where": (
            "Pull up every record for {TC}.",
            "I want all columns for {TC}.",
            "Full rows for {TC}, please.",
            "Everything on file for {TC}?",
            "{FRONT}, show the complete entries.",
        ),
        "count_all": (
            "What's the total count of {T}?",
            "Tell me how many {T} exist.",
            "How many {T} does the database hold?",
            "Give me a count of the {T}.",
            "{T} in total: how many?",
        ),
        "count_where": (
            "Give me a count of {TC}.",
            "What's the tally of {TC}?",
            "{FRONT}, how many are there?",
            "Out of all {T}, how many {PRED}?",
            "Tell me how many {TC} exist.",
        ),
        "agg_all": (
            "Across every {t}, what's the {AGG} {N}?",
            "I need the {AGG} {N} over all {T}.",
            "Tell me the {AGG} {N} among the {T}.",
            "What does the {AGG} {N} of the {T} come to?",
        ),
        "agg_where": (
            "{FRONT}, what's the {AGG} {N}?",
            "Tell me the {AGG} {N} for {TC}.",
            "Among {TC}, the {AGG} {N} is what?",
            "What does the {AGG} {N} come to for {TC}?",
        ),
        "group_count": (
            "Give me a count of {T} {EACH} {C}.",
            "Tally the {T} by {C}.",
            "How are the {T} distributed across {Cs}?",
            "Per {C}, the number of {T}?",
        ),
        "group_agg": (
            "Per {C}, what's the {AGG} {N}?",
            "Show each {C} along with its {AGG} {N}.",
            "The {AGG} {N} {EACH} {C}, please.",
        ),
        "superlative": (
            "Out of all {T}, which one has the {EXT} {N}?",
            "Tell me the {t} whose {N} is the {EXT}.",
            "Which {t} ranks {RANK} by {N}?",
            "{SUPQ}",
        ),
        "top_k": (
            "Which are the {k} {T} ranking {RANKING} by {N}?",
            "Give me the {k} {T} whose {N} is the {EXT}.",
            "{TOPK}",
        ),
        "sorted_list": (
            "Arrange the {T} by {N}, {DIR}.",
            "{T} listed by {N}, {DIR}, please.",
            "Order every {t} by {N} {DIR}.",
        ),
        "group_argmax": (
            "Which {C} is the {REPRESENTED} among the {T}?",
            "Which {C} has the {SHARE} share of {T}?",
            "Name the {C} that appears {OFTEN} among the {T}.",
        ),
        "where_superlative": (
            "{FRONT}, which {t} has the {EXT} {N}?",
            "Looking only at {TC}, which one has the {EXT} {N}?",
            "{SUPCOND}",
        ),
        "join_count": (
            "How many {T} are associated with {PC}?",
            "Give me a count of {T} tied to {PC}.",
            "What's the number of {T} connected to {PC}?",
        ),
        "join_list": (
            "Which {P} are linked to {TC}? Give their {PLs}.",
            "Name the {P} that have at least one {t} {CONDSG}.",
            "{ASK} the {PLs} of {P} associated with {TC}.",
        ),
        "join_agg": (
            "Over the {T} of {PC}, what's the {AGG} {N}?",
            "Considering {PC}, compute the {AGG} {N} of their {T}.",
        ),
        "join_group": (
            "Tally the {T} by the {C} of their {p}.",
            "For every {p} {C}, the number of {T}?",
            "How are the {T} spread over {p} {Cs}?",
        ),
    }

    def conditions(self, cond: Condition, singular: bool) -> list[str]:
        c, op, col = cond.column, cond.op, alt(column_nouns(cond.column))
        having = "having"
        cues = [cue.replace("{v}", V) for cue in c.lex.cues]
        unit = f" {c.lex.unit}" if c.lex.unit else ""
        if not c.numeric:
            if op == Op.EQ:
                return [
                    f"{having} {col} {V}",
                    f"with {col} equal to {V}",
                    f"whose {col} happens to be {V}",
                    f"classified under {col} {V}",
                    *cues,
                ]
            return [
                f"excluding those with {col} {V}",
                f"not {having} {col} {V}",
                f"whose {col} isn't {V}",
                f"apart from {col} {V}",
            ]
        beyond = {
            Op.GT: "{beyond|in excess of|north of|topping}",
            Op.LT: "{short of|beneath|south of}",
            Op.GE: "",
            Op.LE: "",
            Op.EQ: "",
        }[op]
        if op in (Op.GT, Op.LT):
            out = [f"with {col} {beyond} {V}{unit}", f"{having} a {col} {beyond} {V}{unit}"]
            verb = active_verb(c)
            if verb:
                out.append(f"{verb}ing {'more' if op == Op.GT else 'less'} than {V}{unit}")
            out += [f"{d[1]} than {V}{unit}" for d in degrees(c, Order.DESC if op == Op.GT else Order.ASC)]
            part = participle(c)
            if is_year(c) and part:
                out.append(f"{part} {'later than' if op == Op.GT else 'earlier than'} {V}")
            if c.lex.counted:
                out.append(f"{having} {'over' if op == Op.GT else 'under'} {V} {col}")
            return out
        if op == Op.GE:
            return [
                f"with {col} of {V}{unit} and up",
                f"with {col} {V}{unit} or higher",
                f"{having} {col} from {V} upward",
            ]
        if op == Op.LE:
            return [
                f"with {col} of {V}{unit} and below",
                f"with {col} {V}{unit} or lower",
                f"{having} {col} up to {V}",
            ]
        return [f"{having} precisely {V} {col}", f"whose {col} count is {V}"]

    def predicates(self, cond: Condition) -> list[str]:
        c, op, col = cond.column, cond.op, alt(column_nouns(cond.column))
        if not c.numeric:
            cues = [cue.replace("{v}", V) for cue in c.lex.cues]
            if op == Op.EQ:
                return [f"carry {col} {V}", *[f"are listed {cue}" for cue in cues]] + (
                    [f"count as {V}"] if c.lex.noun else []
                )
            return [f"lack {col} {V}", f"have a {col} besides {V}"]
        word = {
            Op.GT: "exceeding",
            Op.LT: "short of",
            Op.GE: "at or above",
            Op.LE: "at or below",
            Op.EQ: "of exactly",
        }[op]
        out = [f"show a {col} {word} {V}"]
        verb = active_verb(c)
        if verb and op in (Op.GT, Op.LT):
            out.append(f"{verb} {'in excess of' if op == Op.GT else 'below'} {V}")
        return out

    def phrase(self, s: Slots, rng: np.random.Generator) -> tuple[str, str | None]:
        fills = self.fills(s, rng)
        surface = None
        if s.cond is not None:
            cond = s.cond
            phrase = f"{alt(table_nouns(cond.table))} {alt(self.conditions(cond, singular=False))}"
            fills["PC" if s.kind in ("join_count", "join_agg") else "TC"] = phrase
            fills["CONDSG"] = alt(self.conditions(cond, singular=True))
            fills["PRED"] = alt(self.predicates(cond))
            fills["FRONT"] = "{Looking only at|Considering just|Restricting to|Within} {the|} " + phrase
            surface = surface_value(cond, rng)
        template = choose(rng, self.KIND_TEMPLATES[s.kind])
        if s.star and "{L" in template:
            template = "Pull up the {t} with the {EXT} {N}."
        text = expand(template, fills, rng)
        return tidy(text), surface

    def fills(self, s: Slots, rng: np.random.Generator) -> dict[str, str]:
        fills = noun_fills(s)
        fills.update(ASK=alt(self.ASK), EACH=alt(self.EACH))
        if s.agg in self.AGG_WORDS:
            fills["AGG"] = alt(self.AGG_WORDS[s.agg])
        if s.order != Order.NONE:
            desc = s.order == Order.DESC
            fills["EXT"] = alt(self.EXTREME[s.order])
            fills["DIR"] = alt(self.DIRECTION[s.order])
            fills["RANK"] = "{first|number one|at the top}" if desc else "{last|at the very bottom}"
            fills["RANKING"] = "{highest|top}" if desc else "{lowest|bottom}"
            fills["REPRESENTED"] = (
                "{best represented|most widespread}" if desc else "{least represented|scarcest}"
            )
            fills["SHARE"] = "{largest|biggest}" if desc else "{smallest|tiniest}"
            fills["OFTEN"] = "{the most times|most often}" if desc else "{the fewest times|least often}"
        if s.number is not None and s.kind in ("superlative", "where_superlative", "top_k"):
            sups = [d[2] for d in degrees(s.number, s.order)]
            if s.kind == "superlative":
                fills["SUPQ"] = alt(
                    [f"Find me the {sup} {{t}} of all." for sup in sups]
                    or ["Find me the {t} with the {EXT} {N}."]
                )
            elif s.kind == "where_superlative":
                fills["SUPCOND"] = alt(
                    [f"Of the {{TC}}, which is the {sup}?" for sup in sups]
                    or ["Of the {TC}, which has the {EXT} {N}?"]
                )
            else:
                fills["TOPK"] = alt(
                    [f"The {{k}} {sup} {{T}}, please." for sup in sups]
                    or ["The {k} {T} with the {EXT} {N}, please."]
                )
        return fills
