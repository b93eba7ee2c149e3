"""The planning env: one proposer for generated tasks and users' files, honest observations, a label
that solves its task, and a team's spec that runs in the sandbox.

The env runs its pipelines in the shared sandbox pool (a process pool, no Ray)."""

from __future__ import annotations

import dataclasses
import io
import math

import numpy as np
import pandas as pd
import pytest

from orchestrl.envs.counterfactual import Edit, EditNotApplicable
from orchestrl.envs.orchestration.planning import grammar, requests
from orchestrl.envs.orchestration.planning.choices import (
    AGENTS,
    FEATURES,
    OPTIONS,
    STEP_KINDS,
    TRIED,
    canonical,
    propose_choices,
)
from orchestrl.envs.orchestration.planning.env import CANDIDATE_FEATURES, CONTEXT, PlanningEnv
from orchestrl.envs.orchestration.planning.grammar import files_task, generate
from orchestrl.envs.orchestration.spec import FilterDuty, Role
from orchestrl.envs.orchestration.synthesis.proposer import Option, Step, filters, requested
from orchestrl.envs.orchestration.synthesis.request import Request
from orchestrl.envs.orchestration.synthesis.search import finish, log_likelihood, run_steps
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

SEEDS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def env():
    made = PlanningEnv(split="train", rounds=2)
    yield made
    made.close()


def csv_round_trip(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(frame.to_csv(index=False)))


def play(env: PlanningEnv, task, actions) -> list[dict]:
    """Every observation of an episode of ``task`` with the same actions each round."""
    obs, _ = env.reset(options={"task": task})
    seen = [obs]
    for _ in range(env.rounds):
        obs, *_ = env.step({a: np.array([actions[a]]) for a in AGENTS})
        seen.append(obs)
    return seen


def test_generation_is_deterministic_and_the_splits_differ():
    a = generate("train", 5)
    b = grammar._build("train", 5)  # past the process cache and the task store: drawn again
    assert a.examples.equals(b.examples) and a.target.equals(b.target) and a.reference == b.reference
    held = [generate("heldout", s) for s in range(3)]
    assert all(not h.examples.equals(generate("train", s).examples) for s, h in enumerate(held))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_label_writes_the_wanted_table(env, seed):
    task = generate("train", seed)
    obs, _ = env.reset(options={"task": task})
    assert obs[AGENTS[0]][OBS_KEY].shape == (CONTEXT + OPTIONS * CANDIDATE_FEATURES,)
    _, rewards, *_ = env.step(env.expert_actions())
    assert rewards[AGENTS[0]] == pytest.approx(1.0)
    assert env.counterfactual_spec() is not None


def test_a_generated_task_through_csv_files_gives_the_same_observation(env):
    """What ``orchestrl plan`` reads (CSV files) is what training saw: the same options, the same
    features, the same observation."""
    task = next(t for t in map(lambda s: generate("train", s), range(7, 40)) if t.description)
    sources = {n: csv_round_trip(f) for n, f in task.sources.items()}
    files = files_task(sources, csv_round_trip(task.examples), task.description)
    actions = task.reference
    for mine, theirs in zip(play(env, task, actions), play(env, files, actions), strict=True):
        for agent in mine:
            np.testing.assert_array_equal(mine[agent][OBS_KEY], theirs[agent][OBS_KEY])
            np.testing.assert_array_equal(mine[agent][MASK_KEY], theirs[agent][MASK_KEY])


@pytest.mark.parametrize("seed", SEEDS[:2])
def test_the_hidden_answer_swapped_leaves_every_observation_unchanged(env, seed):
    """Another wanted table and label that fit the same public inputs (the example rows are the
    first rows of both), played with the same actions over every round and on a warm env over two
    episodes: identical observations; only the rewards may differ."""
    task = generate("train", seed)
    other_target = pd.concat([task.target, task.target.tail(1)], ignore_index=True)
    other_label = {a: (i + 1) % len(task.choices.options[a]) for i, a in enumerate(AGENTS)}
    swapped = dataclasses.replace(task, target=other_target, reference=other_label)
    for actions in (task.reference, other_label):
        for _ in range(2):
            first, second = play(env, task, actions), play(env, swapped, actions)
            for mine, theirs in zip(first, second, strict=True):
                for agent in mine:
                    np.testing.assert_array_equal(mine[agent][OBS_KEY], theirs[agent][OBS_KEY])


def test_options_are_in_canonical_order_whatever_the_prior():
    """The lists do not put the likeliest option first: a slot says nothing about the prior."""
    likely = Option(-0.1, (Step(Role.FILTER, FilterDuty(column="status", op="eq", value="paid")),))
    unlikely = Option(-5.0, (Step(Role.FILTER, FilterDuty(column="amount", op="ge", value=100.0)),))
    assert canonical([likely, unlikely]) == canonical([unlikely, likely])
    task = generate("train", 11)
    for agent, options in task.choices.options.items():
        if agent.startswith("filter"):
            assert not options[0].steps and tuple(options[1:]) == canonical(options[1:]), agent
        else:
            assert tuple(options) == canonical(options), agent


REQUESTED, PLACE, IMPLIED, NAMED_PLACE = FEATURES - 6, FEATURES - 5, FEATURES - 4, FEATURES - 3
"""The features that say the user's request names a filter, an option's place in its list, whether
another named filter implies it, and its place among the named ones none implies
(:func:`.choices.features`)."""


def test_a_request_names_its_filters_first_and_the_feature_says_so():
    """A filter the user's words name is listed and flagged, whatever its prior; without words no
    filter is flagged."""
    rows = 40
    sources = {
        "orders": pd.DataFrame(
            {
                "order_id": range(rows),
                "region": ["North", "South", "East", "West"] * 10,
                "status": ["paid", "paid", "void", "paid", "refunded"] * 8,
                "amount": [float(10 + 7 * i % 90) for i in range(rows)],
            }
        )
    }
    wanted = sources["orders"].query("region == 'East' and status != 'refunded' and amount >= 50")
    examples = wanted.head(5)[["order_id", "amount"]]
    plain = propose_choices(sources, examples)
    asked = propose_choices(sources, examples, "Orders from the East. Not refunded. Amount of 50 or more.")
    names = {o.label: i for i, o in enumerate(asked.options["filter_0"])}
    for label in (
        "region eq East (requested)",
        "status ne refunded (requested)",
        "amount ge 50.0 (requested)",
    ):
        assert label in names, sorted(names)
        assert asked.features[AGENTS.index("filter_0"), names[label], REQUESTED] == 1.0, label
    assert not plain.features[:, :, REQUESTED].any()
    assert asked.features[AGENTS.index("filter_0"), 0, REQUESTED] == 0.0  # "no filter"
    places = asked.features[AGENTS.index("filter_0"), : len(names), PLACE]
    assert (np.diff(places) > 0).all()  # two agents with one list can agree on two of its entries


def test_a_named_filter_that_a_stronger_named_one_implies_says_so():
    """ "Only paid, not void or refunded": the two left-out values are implied by the kept one (it
    keeps a subset of their rows), and of the named filters none implies, in list order, the first
    is ``filter_0``'s and the second ``filter_1``'s: how two filter agents split a request that
    names two."""
    rows = 40
    orders = pd.DataFrame(
        {
            "order_id": range(rows),
            "status": ["paid", "paid", "void", "paid", "refunded"] * 8,
            "amount": [float(10 + 7 * i % 90) for i in range(rows)],
        }
    )
    examples = orders.query("status == 'paid' and amount >= 50").head(5)[["order_id", "amount"]]
    choices = propose_choices(
        {"orders": orders}, examples, "Only the paid ones. Not void or refunded. Amount of 50 or more."
    )
    filter_0 = AGENTS.index("filter_0")
    named = {o.label: i for i, o in enumerate(choices.options["filter_0"]) if requested(o)}
    strong = ["amount ge 50.0 (requested)", "status eq paid (requested)"]
    weak = ["status ne refunded (requested)", "status ne void (requested)"]
    assert set(strong + weak) <= set(named), sorted(named)
    for label in weak:
        assert choices.features[filter_0, named[label], IMPLIED] == 1.0, label
        assert choices.features[filter_0, named[label], NAMED_PLACE] == 0.0, label
    first, second = sorted(named[label] for label in strong)
    for agent, mine, other in (("filter_0", first, second), ("filter_1", second, first)):
        assert choices.features[AGENTS.index(agent), [mine, other], NAMED_PLACE].tolist() == [1.0, 0.5], agent
    assert not choices.features[filter_0, [named[label] for label in strong], IMPLIED].any()
    assert not choices.features[filter_0, 0, [IMPLIED, NAMED_PLACE]].any()  # "no filter"


def _orders() -> pd.DataFrame:
    """An export with a status, a region, an amount and an e-mail address that is sometimes missing."""
    return pd.DataFrame(
        {
            "Pay Status": ["Paid", "Void", "Open", "Paid"] * 25,
            "sales_region": ["North", "South", "East", "West"] * 25,
            "Order Value": [float(i * 37 % 3000) for i in range(100)],
            "Contact Email": [None if i % 7 == 0 else f"p{i}@x.org" for i in range(100)],
        }
    )


@pytest.mark.parametrize(
    "op,value",
    [
        ("eq", "Paid"),
        ("ne", "Void"),
        ("in", ("North", "West")),
        ("ge", 1500.0),
        ("lt", 20.0),
        ("notnull", None),
    ],
)
def test_a_generated_request_is_read_back_as_the_filter_it_names(monkeypatch, op, value):
    """:func:`.requests.describe` writes each kind of filter in words that
    :class:`..synthesis.request.Request` reads back as that filter."""
    monkeypatch.setattr(requests, "DESCRIBED", 1.0)
    monkeypatch.setattr(requests, "NAMED", 1.0)
    column = {"eq": "Pay Status", "ne": "Pay Status", "in": "sales_region", "notnull": "Contact Email"}
    frame = _orders()
    name = column.get(op, "Order Value")
    step = Step(Role.FILTER, FilterDuty(column=name, op=op, value=value))
    for seed in range(8):  # every wording
        words = requests.describe([step], (), np.random.default_rng(seed))
        listed = [o for o in filters(frame, frame.head(0), Request.read(words)) if requested(o)]
        assert any(o.steps == (step,) for o in listed), (words, [o.label for o in listed])


def test_a_request_may_also_leave_out_values_its_kept_value_implies(monkeypatch):
    """With :data:`.requests.REDUNDANT`, a kept value comes with other values of its column left
    out in words: read back, those are filters that change nothing after the kept value's."""
    for name, value in (("DESCRIBED", 1.0), ("NAMED", 1.0), ("REDUNDANT", 1.0), ("ASIDE", 0.0)):
        monkeypatch.setattr(requests, name, value)
    frame = _orders()
    step = Step(Role.FILTER, FilterDuty(column="Pay Status", op="eq", value="Paid"))
    kept = frame[frame["Pay Status"] == "Paid"]
    for seed in range(8):
        words = requests.describe([step], (), np.random.default_rng(seed), frame)
        listed = [o for o in filters(frame, frame.head(0), Request.read(words)) if requested(o)]
        extra = [o for o in listed if o.steps != (step,)]
        assert any(o.steps == (step,) for o in listed), words
        assert any(o.steps[0].duty.op == "ne" for o in extra), (words, [o.label for o in extra])
        for option in extra:
            assert option.steps[0].duty.column == "Pay Status", (words, option.label)
            assert len(run_steps(kept, option.steps, {})) == len(kept), (words, option.label)


def test_which_rows_count_is_said_in_words_read_back_as_such(monkeypatch):
    """Of a pipeline that counts a change log once per record, :func:`.requests.describe` says that
    only each record's latest row counts; of one that left-joins a lookup, that rows it lacks are
    kept; in words :class:`..synthesis.request.Request` reads as such. A request for any other
    pipeline says neither."""
    for name, value in (
        ("DESCRIBED", 1.0),
        ("NAMED", 1.0),
        ("ROWS_SAID", 1.0),
        ("REDUNDANT", 0.0),
        ("ASIDE", 0.0),
    ):
        monkeypatch.setattr(requests, name, value)
    step = Step(Role.FILTER, FilterDuty(column="Pay Status", op="eq", value="Paid"))
    for seed in range(12):  # every wording
        said = requests.describe([step], (), np.random.default_rng(seed), latest="order_id")
        kept = requests.describe([step], (), np.random.default_rng(seed), unmatched="customer_list")
        plain = requests.describe([step], (), np.random.default_rng(seed))
        assert Request.read(said).latest and "order id" in said, said
        assert Request.read(kept).keeps_unmatched and "customer list" in kept, kept
        assert not Request.read(said).keeps_unmatched and not Request.read(kept).latest, (said, kept)
        assert not Request.read(plain).latest and not Request.read(plain).keeps_unmatched, plain


def test_one_row_per_key_is_drawn_mostly_on_a_change_logs_row_key_and_rarely_on_another_column():
    """A table whose row key repeats is a change log: its cleaning is one row per key about
    :data:`.grammar.LATEST_WANTED` of the time; one row per another repeated column (a customer a
    fact names again and again) about :data:`.grammar.ONE_PER_VALUE` of the time."""
    shares = {}
    for seed in range(400):
        export = grammar.generate_sources(np.random.default_rng(seed), 1, dirty=True)
        draft = propose_choices(export.sources, grammar.NO_EXAMPLES)
        listed = draft.options["clean_0"]
        keyed = [i for i, o in enumerate(listed) if grammar._key_of(o.steps) is not None]
        if not keyed:
            continue
        column = grammar._key_of(listed[keyed[0]].steps)
        kind = "row key" if column == export.row_keys[draft.names[0]] else "other"
        if kind in shares:
            continue
        rng = np.random.default_rng(0)
        draws = [grammar._decisions(draft, rng, export.row_keys)["clean_0"] for _ in range(400)]
        shares[kind] = np.isin(draws, keyed).mean()
        if len(shares) == 2:
            break
    assert shares["row key"] == pytest.approx(grammar.LATEST_WANTED, abs=0.06)
    assert shares["other"] == pytest.approx(grammar.ONE_PER_VALUE, abs=0.05)


def test_an_aside_names_a_value_of_a_column_no_filter_reads(monkeypatch):
    """With :data:`.requests.ASIDE`, the request names a value of a category column the pipeline
    does not filter on (what a reader of people's words also proposes); never one it filters on."""
    for name, value in (("DESCRIBED", 1.0), ("NAMED", 1.0), ("REDUNDANT", 0.0), ("ASIDE", 1.0)):
        monkeypatch.setattr(requests, name, value)
    frame = _orders()
    step = Step(Role.FILTER, FilterDuty(column="Pay Status", op="eq", value="Paid"))

    def named(words: str) -> set[str]:
        listed = filters(frame, frame.head(0), Request.read(words))
        return {o.steps[0].duty.column for o in listed if requested(o)}

    for seed in range(8):
        words = requests.describe([step], (), np.random.default_rng(seed), frame)
        assert named(words) == {"Pay Status", "sales_region"}, words
        assert named(requests.describe([step], (), np.random.default_rng(seed))) == {"Pay Status"}  # no table


def test_features_read_the_public_inputs_and_pad_with_zeros():
    task = generate("train", 3)
    choices = propose_choices(task.sources, task.examples, task.description)
    assert choices.features.shape == (len(AGENTS), OPTIONS, FEATURES)
    np.testing.assert_array_equal(choices.features, task.choices.features)
    for a, agent in enumerate(AGENTS):
        live = len(choices.options[agent])
        assert (choices.features[a, :live, len(STEP_KINDS)] == 1.0).all(), agent  # listed
        assert not choices.features[a, live:].any(), agent


def test_counterfactual_replaces_one_choice_and_scores_it(env):
    task = generate("train", 0)
    env.reset(options={"task": task})
    env.step(env.expert_actions())
    env.step(env.expert_actions())
    spec = env.counterfactual_spec()
    agent = next(a for a in AGENTS if len(task.choices.options[a]) > 1)
    other = (task.reference[agent] + 1) % len(task.choices.options[agent])
    outcome = env.counterfactual(spec, agent, Edit.alternative(np.array([other])))
    assert outcome.base_reward == pytest.approx(1.0)
    assert outcome.reward <= 1.0
    with pytest.raises(EditNotApplicable):
        env.counterfactual(spec, agent, Edit.alternative(np.array([task.reference[agent]])))


def test_bad_kwargs_are_refused_in_one_line():
    with pytest.raises(ValueError, match="split"):
        PlanningEnv(split="test")
    with pytest.raises(ValueError, match="rounds"):
        PlanningEnv(rounds=0)


def test_after_a_round_each_option_is_tried_with_the_others_on_their_choices(env):
    """Round 1 leaves out the label's filter; round 2 shows each of the filter agent's options tried
    with its teammates on their round-1 choices (here a join that is not the list's first), so the
    label's filter is shown as the move that gives the label's output (held, with its likelihood);
    every other feature is as in round 1."""
    task = generate("heldout", 19)
    label = task.reference
    assert label["join"] and label["filter_0"], "this test needs a label with a join and a filter"
    slot, option = AGENTS.index("filter_0"), label["filter_0"]
    first, _ = env.reset(options={"task": task})
    second, *_ = env.step({a: np.array([0 if a == "filter_0" else label[a]]) for a in AGENTS})
    before = first["filter_0"][OBS_KEY][CONTEXT:].reshape(OPTIONS, CANDIDATE_FEATURES)
    after = second["filter_0"][OBS_KEY][CONTEXT:].reshape(OPTIONS, CANDIDATE_FEATURES)
    done = finish(task.choices.table(label), task.examples, task.choices.facts, None)
    assert done is not None
    likelihood = math.exp(log_likelihood(done[2], task.examples))
    assert after[option, TRIED].tolist() == pytest.approx([1.0, likelihood])
    np.testing.assert_array_equal(before[:, TRIED], task.choices.features[slot][:, TRIED])
    assert not np.array_equal(after[:, TRIED], before[:, TRIED])
    np.testing.assert_array_equal(after[:, : TRIED.start], before[:, : TRIED.start])
    assert after[0, FEATURES] == 1.0 and after[:, FEATURES].sum() == 1.0  # taken last round


def test_the_generator_draws_every_kind_of_filter():
    """The generator's filters come from every single filter the table allows (its draft list is not
    cut to the likeliest, which on a table with no example rows are all equalities): over many draws
    a pipeline keeps a value, leaves one out, keeps a set and bounds a number."""
    export = grammar.generate_sources(np.random.default_rng(3), 1, dirty=False)
    draft = grammar._every_filter(propose_choices(export.sources, grammar.NO_EXAMPLES))
    listed = draft.options["filter_0"]
    rng = np.random.default_rng(0)
    drawn = set()
    for _ in range(300):
        actions = grammar._decisions(draft, rng, export.row_keys)
        drawn |= {listed[actions[a]].steps[0].duty.op for a in ("filter_0", "filter_1") if actions[a]}
    assert {"eq", "ne", "in"} <= drawn, drawn
    assert drawn & {"ge", "lt"}, drawn


def test_the_two_filters_are_labelled_named_first_then_in_list_order_whichever_was_drawn_first():
    """The label's filters are a set written one way: the ones the request names (none implying
    them) first, then the others, each group in list order; ``filter_0`` takes the first and
    ``filter_1`` the second or none, and the same pair drawn in either order gives the same label."""
    choices = generate("train", 0).choices
    first, second = 1, len(choices.options["filter_0"]) - 1
    actions = {a: 0 for a in AGENTS}
    for drawn in ((second, first), (first, second)):
        label = grammar._label(choices, choices, {**actions, "filter_0": drawn[0], "filter_1": drawn[1]})
        assert (label["filter_0"], label["filter_1"]) == (first, second)
    label = grammar._label(choices, choices, {**actions, "filter_1": second})
    assert (label["filter_0"], label["filter_1"]) == (second, 0)
    orders = pd.DataFrame(
        {
            "order_id": range(40),
            "region": ["North", "South", "East", "West"] * 10,
            "amount": [float(10 + 7 * i % 90) for i in range(40)],
        }
    )
    examples = orders.query("region == 'East' and amount >= 50").head(5)[["order_id", "amount"]]
    named = propose_choices({"orders": orders}, examples, "Amount of 50 or more.")  # the later one
    listed = {o.label: i for i, o in enumerate(named.options["filter_0"])}
    first, second = listed["region eq East"], listed["amount ge 50.0 (requested)"]
    assert first < second
    for drawn in ((second, first), (first, second)):
        label = grammar._label(named, named, {**actions, "filter_0": drawn[0], "filter_1": drawn[1]})
        assert (label["filter_0"], label["filter_1"]) == (second, first)


def test_a_filter_is_listed_when_it_keeps_the_example_rows_on_a_left_join():
    """A visit whose client is not on the client list yet is one of the wanted (late or missed)
    rows: the inner join drops it and the left join keeps it. The status filter keeps every example
    row on the left join, so it is listed, though on the inner join one shown day is then missing."""
    visits = pd.DataFrame(
        {
            "visit_id": [f"V{i}" for i in range(1, 13)],
            "day": ["Mon", "Tue", "Wed", "Thu", "Fri", "Tue", "Wed", "Thu", "Fri", "Wed", "Tue", "Mon"],
            "client_id": ["C1", "C2", "C3"] * 3 + ["C1", "C2", "C9"],
            "status": ["Completed", "Late", "Completed", "Missed", "Cancelled", "Late"] * 2,
        }
    )
    clients = pd.DataFrame(
        {"client_id": ["C1", "C2", "C3"], "client_name": ["Ann", "Bob", "Cy"], "area": ["N", "S", "E"]}
    )
    wanted = visits.merge(clients, on="client_id", how="left").query("status in ('Late', 'Missed')")
    examples = wanted[["visit_id", "day", "client_name", "area", "status"]].tail(5)
    assert examples["client_name"].isna().any()  # the unlisted client's visit is shown
    choices = propose_choices({"visits": visits, "clients": clients}, examples)
    labels = [o.label for o in choices.options["filter_0"]]
    assert "status in ('Late', 'Missed')" in labels, labels


BELOW, INSIDE, ABOVE = (len(STEP_KINDS) + i for i in (11, 12, 13))
"""The features that place a threshold against the range of the values the example rows show."""


def test_a_bound_an_example_row_sits_on_reads_as_on_the_rows_side():
    """ "3 or more bedrooms" with a 3-bedroom row shown is the same evidence as a bound below every
    shown row: the filter keeps them all. Only a bound strictly between the shown values (one that
    drops some of them) reads as inside their range."""
    homes = pd.DataFrame(
        {
            "listing": [f"L{i}" for i in range(12)],
            "bedrooms": [1, 2, 3, 4, 5, 3, 2, 4, 1, 5, 3, 2],
            "price": [float(100 + 10 * i) for i in range(12)],
        }
    )
    examples = homes[homes["bedrooms"] >= 3][["listing", "bedrooms", "price"]].head(5)
    assert examples["bedrooms"].min() == 3
    choices = propose_choices({"homes": homes}, examples, "Homes with 3 or more bedrooms.")
    filter_0 = AGENTS.index("filter_0")
    placed = {}
    for i, option in enumerate(choices.options["filter_0"]):
        duty = option.steps[0].duty if option.steps else None
        if duty is not None and duty.column == "bedrooms" and duty.op == "ge":
            placed[float(duty.value)] = tuple(choices.features[filter_0, i, [BELOW, INSIDE, ABOVE]])
    assert placed[3.0] == (1.0, 0.0, 0.0), placed  # the bound the 3-bedroom row sits on
    assert all(place == (1.0, 0.0, 0.0) for place in placed.values()), placed
    bound = Option(0.0, (Step(Role.FILTER, FilterDuty(column="bedrooms", op="ge", value=4.0)),), "ge 4")
    listed = (*choices.options["filter_0"], bound)  # not proposed: it drops the shown 3-bedroom rows
    wider = dataclasses.replace(
        choices, options={**choices.options, "filter_0": listed}, tried={}, computed={}
    )
    assert tuple(wider.features[filter_0, len(listed) - 1, [BELOW, INSIDE, ABOVE]]) == (0.0, 1.0, 0.0)


REQUESTED_AT = len(STEP_KINDS) + 21
"""The feature that says the user's request names an option."""


def test_one_row_per_key_of_a_change_log_the_request_counts_at_its_latest_row_reads_as_requested():
    """A cleaning agent sees that the request asks for one row per record ("only each ticket's
    latest status counts") on the one-row-per-key option alone; without those words, on none."""
    log = pd.DataFrame(
        {
            "ticket": ["T9", "T4", "T2", "T4", "T7", "T2", "T1", "T3", "T5", "T6"],
            "team": ["Ops", "Web", "Ops", "Web", "App", "Ops", "Web", "App", "Ops", "Web"],
            "status": ["Open", "Closed", "Open", "Open", "Open", "New", "Closed", "Open", "New", "Open"],
            "hours": [3, 5, 2, 5, 8, 2, 1, 4, 6, 2],
        }
    )
    examples = log.drop_duplicates("ticket").head(4)
    clean_0 = AGENTS.index("clean_0")
    for words, latest in (
        ("Hours per ticket; only each ticket's latest status counts.", True),
        (None, False),
    ):
        choices = propose_choices({"tickets": log}, examples, words)
        keyed = [
            i for i, o in enumerate(choices.options["clean_0"]) if o.steps and o.steps[-1].role is Role.DEDUP
        ]
        assert len(keyed) == 1, [o.label for o in choices.options["clean_0"]]
        live = len(choices.options["clean_0"])
        flags = choices.features[clean_0, :live, REQUESTED_AT].tolist()
        assert flags == [float(latest and i in keyed) for i in range(live)], flags


def test_the_synthesiser_beside_the_team_reads_the_same_words():
    """The env's reference synthesiser (``solver_success``, the baseline a team is measured
    against) gets the request the team reads: on a change log (each change its own number) the
    words say to count at each member's latest row, and whose examples fit every row as well, it
    succeeds with them and not without them."""
    log = pd.DataFrame(
        {
            "change": [f"CH-{i:03d}" for i in range(9, 0, -1)],
            "member_id": ["M07", "M03", "M01", "M02", "M03", "M04", "M05", "M06", "M01"],
            "name": ["Ada", "Cy", "Bo", "Di", "Cy", "Ed", "Fi", "Gus", "Bo"],
            "tier": ["Gold", "Silver", "Gold", "Silver", "Gold", "Bronze", "Gold", "Silver", "Silver"],
            "fee": [40, 25, 40, 25, 40, 10, 40, 25, 25],
        }
    )
    target = log.drop_duplicates("member_id")[["change", "name", "tier"]].reset_index(drop=True)
    said = "Each member's tier; the export lists every change, newest first: the latest row counts."
    solved = {}
    for words in (said, None):
        task = grammar.PlanningTask("heldout", 0, "user", {"log": log}, target.head(3), target, None, words)
        made = PlanningEnv(split="heldout", rounds=1, reference_metrics=True)
        try:
            made.reset(options={"task": task})
            *_, infos = made.step({a: np.array([0]) for a in AGENTS})
        finally:
            made.close()
        solved[words] = infos["clean_0"]["metrics"]["solver_success"]
    assert solved == {said: 1.0, None: 0.0}
