"""The spec schema: YAML round trips, and every malformation is a structured SpecError."""

from __future__ import annotations

import math

import pytest

from orchestrl.envs.orchestration.spec import (
    DedupDuty,
    FilterDuty,
    OrchestrationSpec,
    Role,
    SpecError,
    SpecIssue,
    base_duty,
    parse_spec,
)

GOOD = """
version: 1
task: {level: 2, split: train, seed: 7}
sources: [orders, customers]
nodes:
- id: agent_0
  role: filter
  duty: {kind: filter, column: status, op: eq, value: shipped}
  deps: [orders]
- id: agent_1
  role: join
  duty: {left_on: customer, right_on: customer}
  capacity: medium
  deps: [agent_0, customers]
- id: agent_2
  role: select
  duty: {columns: {customer: client, region: region}}
  deps: [agent_1]
"""


def _spec_with(nodes: list[dict]) -> dict:
    return {"sources": ["orders", "customers"], "nodes": nodes}


def _node(node_id: str, deps: list[str], role: str = "dedup", duty: dict | None = None) -> dict:
    return {"id": node_id, "role": role, "duty": duty or {"kind": role}, "deps": deps}


def test_spec_round_trips_through_yaml() -> None:
    spec = parse_spec(GOOD)
    again = OrchestrationSpec.from_yaml(spec.to_yaml())
    assert again == spec
    assert again.output_id == "agent_2"
    assert again.node("agent_2").duty.columns == (("customer", "client"), ("region", "region"))
    assert again.edges() == 4


def test_a_sort_of_every_row_stays_every_row_through_yaml() -> None:
    """A topk node with no k sorts every row; its YAML says so (k: null), it is not read back as
    the top 10 of the base duty."""
    data = _spec_with([_node("agent_0", ["orders"], "topk", {"kind": "topk", "column": "amount", "k": None})])
    spec = parse_spec(data)
    again = OrchestrationSpec.from_yaml(spec.to_yaml())
    assert again == spec and again.node("agent_0").duty.k is None


def test_duty_without_kind_takes_the_role() -> None:
    spec = parse_spec(GOOD)
    assert spec.node("agent_1").duty.kind == "join"
    assert spec.node("agent_1").capacity.value == "medium"


def test_cycle_is_reported_with_its_path() -> None:
    data = _spec_with([_node("a", ["b"]), _node("b", ["a"])])
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.codes == ["cycle"]
    assert "a -> b -> a" in str(err.value) or "b -> a -> b" in str(err.value)


def test_self_dependency_is_a_cycle() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([_node("a", ["a"])]))
    assert err.value.codes == ["cycle"]


def test_dangling_dependency_names_the_missing_input() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([_node("a", ["orders"]), _node("b", ["ghost"])]))
    assert err.value.codes == ["dangling_dep"]
    assert "ghost" in str(err.value)


def test_role_duty_mismatch_is_an_issue() -> None:
    node = _node("a", ["orders"], role="filter", duty={"kind": "join", "left_on": "x", "right_on": "x"})
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([node]))
    assert err.value.codes == ["role_duty_mismatch"]
    assert err.value.issues[0].location == "nodes.0"


def test_join_with_one_input_and_filter_with_two_are_arity_errors() -> None:
    join = _node("a", ["orders"], role="join", duty={"kind": "join"})
    filt = _node("b", ["orders", "customers"], role="filter", duty={"kind": "filter"})
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([join, filt]))
    assert err.value.codes == ["arity", "arity"]


def test_duplicate_ids_and_ids_shadowing_sources_are_rejected() -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([_node("a", ["orders"]), _node("a", ["orders"])]))
    assert err.value.codes == ["duplicate_id"]
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([_node("orders", ["customers"])]))
    assert err.value.codes == ["id_clash"]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_duty_values_are_rejected(value: float) -> None:
    node = _node(
        "a", ["orders"], role="filter", duty={"kind": "filter", "column": "qty", "op": "gt", "value": value}
    )
    with pytest.raises(SpecError) as err:
        parse_spec(_spec_with([node]))
    assert err.value.codes[0].startswith("schema:")


@pytest.mark.parametrize(
    "garbage",
    [
        "- just\n- a list",
        "nodes: [",
        "{}",
        "sources: [a]\nnodes: []",
        "sources: [a]\nnodes: [{id: 1}]",
        "sources: [a]\nnodes: [{id: x, role: teleport, duty: {}, deps: [a]}]",
        "42",
    ],
)
def test_garbage_raises_only_spec_error(garbage: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(garbage)
    assert err.value.issues and all(i.code for i in err.value.issues)


def test_base_duties_are_parameter_free_defaults() -> None:
    assert base_duty(Role.DEDUP) == DedupDuty() and DedupDuty().is_base
    assert not FilterDuty(column="status", op="eq", value="shipped").is_base
    assert all(base_duty(role).kind == role.value for role in Role)


def test_topological_order_follows_dependencies_not_listing_order() -> None:
    data = _spec_with([_node("late", ["early"]), _node("early", ["orders"])])
    data["output"] = "late"
    spec = parse_spec(data)
    assert spec.topological_order() == ("early", "late")
    assert spec.descendants("early") == {"late"}


def test_a_spec_error_survives_copy_and_pickle_with_its_issues():
    """Ray copies an env's exception between workers: a SpecError must rebuild from its issues."""
    import copy
    import pickle

    error = SpecError([SpecIssue(code="unknown_output", location="", message="output x is not a node")])
    for again in (copy.copy(error), pickle.loads(pickle.dumps(error))):
        assert again.codes == ["unknown_output"] and str(again) == str(error)
