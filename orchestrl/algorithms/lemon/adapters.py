"""Adapters from envs with their own counterfactual API to :class:`.protocol.CounterfactualEnv`.

The orchestration env (``orchestrl.envs.orchestration.env.OrchestrationEnv``) re-executes edited
specs itself, through its node cache, with its own vocabulary:

=========================  ===========================================================
this protocol              orchestration env
=========================  ===========================================================
``counterfactual_spec()``  ``env.last_spec`` (the last executed spec)
``BASE_DUTY``              ``Edit.revert_duty()``
``DROP_EDGE``              ``Edit.drop_dep(i)``, ``i`` drawn uniformly among the node's deps
``DOWNGRADE_CAPACITY``     ``Edit.downgrade_capacity()``
``ALTERNATIVE``            ``Edit.swap(action)``
not applicable             ``result.applicable is False``
=========================  ===========================================================

An edit that makes the spec invalid IS applicable: it scores the env's invalid-spec penalty, as
in LEMON. Nothing here imports the orchestration package until an orchestration env is adapted.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrl.envs.counterfactual import (
    CounterfactualEnv,
    CounterfactualOutcome,
    Edit,
    EditFamily,
    EditNotApplicable,
    supports_counterfactual,
)

ORCHESTRATION_ENV = "orchestrl.envs.orchestration.env.OrchestrationEnv"


def qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class OrchestrationCounterfactuals:
    """:class:`CounterfactualEnv` over an orchestration env."""

    def __init__(self, env: Any, rng: np.random.Generator | None = None) -> None:
        self.env = env
        self.rng = rng or np.random.default_rng(0)

    def counterfactual_spec(self) -> Any:
        return self.env.last_spec

    def counterfactual_edits(self, spec: Any, agent: str) -> list[EditFamily]:
        families = [EditFamily.ALTERNATIVE]
        try:
            node = spec.node(agent)
        except KeyError:  # an idle agent wrote no node: only a swap changes anything
            return families
        if not node.duty.is_base:
            families.append(EditFamily.BASE_DUTY)
        if node.deps:
            families.append(EditFamily.DROP_EDGE)
        if node.capacity != type(node.capacity)("small"):
            families.append(EditFamily.DOWNGRADE_CAPACITY)
        return families

    def counterfactual(self, spec: Any, agent: str, edit: Edit) -> CounterfactualOutcome:
        from orchestrl.envs.orchestration.edits import Edit as OrchestrationEdit

        if edit.family is EditFamily.BASE_DUTY:
            native = OrchestrationEdit.revert_duty()
        elif edit.family is EditFamily.DROP_EDGE:
            deps = spec.node(agent).deps if agent in {n.id for n in spec.nodes} else ()
            native = OrchestrationEdit.drop_dep(int(self.rng.integers(len(deps))) if deps else -1)
        elif edit.family is EditFamily.DOWNGRADE_CAPACITY:
            native = OrchestrationEdit.downgrade_capacity()
        else:
            native = OrchestrationEdit.swap(np.asarray(edit.action).reshape(-1))
        result = self.env.counterfactual(spec, agent, native)
        if not result.applicable:
            raise EditNotApplicable(f"{edit.family} changes nothing for {agent}")
        terms = {
            **dict(result.terms),
            "nodes_run": float(result.nodes_run),
            "cache_hits": float(result.cache_hits),
        }
        return CounterfactualOutcome(
            reward=float(result.reward), base_reward=float(result.base_reward), terms=terms
        )


ADAPTERS: dict[str, type] = {ORCHESTRATION_ENV: OrchestrationCounterfactuals}
"""Env class (qualified name) -> adapter class."""


def has_counterfactual_api(env_or_class: Any) -> bool:
    """True when the env implements the protocol itself or has an adapter here."""
    cls = env_or_class if isinstance(env_or_class, type) else type(env_or_class)
    return supports_counterfactual(env_or_class) or any(qualified_name(c) in ADAPTERS for c in cls.__mro__)


def as_counterfactual_env(env: Any, rng: np.random.Generator | None = None) -> CounterfactualEnv | None:
    """``env`` itself when it implements the protocol, else its adapter, else None."""
    if supports_counterfactual(env):
        return env
    for cls in type(env).__mro__:
        adapter = ADAPTERS.get(qualified_name(cls))
        if adapter is not None:
            return adapter(env, rng)
    return None
