"""The counterfactual protocol: what an env offers so LEMON can re-execute one agent's edited choice.

LEMON (arXiv 2605.14483) takes the spec a team wrote, applies exactly ONE edit to one agent's part of
it, re-executes the edited spec and uses the reward contrast ``delta = R(spec) - R(edited spec)`` as
that agent's credit. An env that can do this implements :class:`CounterfactualEnv`:

- ``counterfactual_spec()``: the spec of the episode that just ended, i.e. everything its final
  reward was computed from: the spec the final step executed (None when there is none, e.g. the
  final round's spec was invalid: nothing is replayed then). It is read in the env runner's
  ``on_episode_end``, before RLlib's vector env resets that sub-env (it resets on the next
  ``step`` call, "next_step" autoreset).
- ``counterfactual_edits(spec, agent)``: the edit families that change something for this agent
  (reverting a duty that already is the base duty is not an edit).
- ``counterfactual(spec, agent, edit)``: re-executes ``spec`` with ``agent``'s part edited (an env
  with a node cache re-runs only what changed) and returns ``R(edited)``, ``R(spec)`` and the
  terms of the edited reward.

The orchestration env (``orchestrl.envs.orchestration.env``) and the matrix game implement it.

This module imports nothing heavy, so envs can implement the protocol without importing torch/Ray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable


class EditFamily(StrEnum):
    """The four kinds of one-step edit (LEMON's three, plus an alternative from the agent's policy)."""

    BASE_DUTY = "base_duty"
    """Roll the agent's customised duty back to its role's base duty."""
    DROP_EDGE = "drop_edge"
    """Drop one of the agent's dependency edges."""
    DOWNGRADE_CAPACITY = "downgrade_capacity"
    """Downgrade the agent's capacity by one level."""
    ALTERNATIVE = "alternative"
    """Swap the agent's action for an alternative sampled from its own policy: the team's other
    actions stay, and whatever depends on this agent's choice follows it (the counterfactual of
    the team's actions, not of one part of the spec)."""


EDIT_FAMILIES: tuple[EditFamily, ...] = tuple(EditFamily)


@dataclass(frozen=True)
class Edit:
    """One edit of one agent's action."""

    family: EditFamily
    action: Any = None
    """``ALTERNATIVE``: the action swapped in (any action of the agent's space, idle included)."""
    edge: int = -1
    """``DROP_EDGE``: which of the agent's dependency edges, taken modulo their number (-1: the last)."""

    @classmethod
    def base_duty(cls) -> Edit:
        return cls(EditFamily.BASE_DUTY)

    @classmethod
    def drop_edge(cls, edge: int = -1) -> Edit:
        return cls(EditFamily.DROP_EDGE, edge=int(edge))

    @classmethod
    def downgrade_capacity(cls) -> Edit:
        return cls(EditFamily.DOWNGRADE_CAPACITY)

    @classmethod
    def alternative(cls, action: Any) -> Edit:
        return cls(EditFamily.ALTERNATIVE, action=action)


@dataclass(frozen=True)
class CounterfactualOutcome:
    """``R(edited)``, ``R(spec)`` and the edited reward's terms (success, cost, nodes re-run...)."""

    reward: float
    base_reward: float
    terms: Mapping[str, float] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        """``R(spec) - R(edited)``: how much the agent's actual choice was worth."""
        return self.base_reward - self.reward


class EditNotApplicable(ValueError):
    """The edit changes nothing for this agent (or the env does not support that family)."""


@runtime_checkable
class CounterfactualEnv(Protocol):
    """An env that can re-evaluate its last finished episode with one agent's action edited."""

    def counterfactual_spec(self) -> Any:
        """The spec the most recently finished episode's final step executed (None before the first
        episode ends, or when that step executed none)."""
        ...

    def counterfactual_edits(self, spec: Any, agent: str) -> Sequence[EditFamily]:
        """The edit families that would change ``agent``'s part of ``spec``."""
        ...

    def counterfactual(self, spec: Any, agent: str, edit: Edit) -> CounterfactualOutcome:
        """Re-executes ``spec`` with ``agent``'s part edited; raises :class:`EditNotApplicable`."""
        ...


class NoCounterfactualAPIError(ValueError):
    """``advantage: replay`` was asked of an env that cannot re-execute edited specs."""


def supports_counterfactual(env_or_class: Any) -> bool:
    """True when an env (or env class) has every method of :class:`CounterfactualEnv`."""
    return all(
        callable(getattr(env_or_class, name, None))
        for name in ("counterfactual_spec", "counterfactual_edits", "counterfactual")
    )
