"""What a served team answers: the endpoint protocol, ``POST /act``, and the endpoints of a family.

An endpoint is a class built from the :class:`ServedTeam` with a ``path``, a one-line ``summary``
(``orchestrl serve`` prints it) and ``__call__(body: dict) -> dict`` that raises
:class:`RequestError` (field, message) on bad input; :class:`ActEndpoint` is the model, served for
every env. An env family adds its own in ``orchestrl.apps.<family>`` and declares them in its
registry entry (:attr:`orchestrl.envs.registry.EnvEntry.endpoints`); nothing here names a family.

An endpoint class that answers about files the server is started with (``orchestrl serve
--database NAME=FILE``) sets ``reads_databases = True`` and may define a classmethod
``check_database(path)`` that raises ``ValueError`` (one line) for a file it cannot answer about,
so a bad file is refused before Ray starts.

An endpoint answers one request at a time (the router holds a lock around ``__call__``) unless
its class sets ``concurrent = True``: its ``__call__`` is then safe on several threads at once
(:class:`ActEndpoint`: a forward pass that changes nothing).

Limits: an endpoint reads those that concern it from :attr:`ServedTeam.limits`
(:class:`~orchestrl.deploy.limits.ServeLimits`) and, for work that can run long, the time its request
has left from :func:`remaining_s` (the router sets the deadline, :data:`DEADLINE`): work past it
should stop and raise ``RequestError("request", ..., status=504)``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

from orchestrl.deploy.limits import ServeLimits
from orchestrl.dotted import load
from orchestrl.envs.registry import family_endpoints
from orchestrl.experiment.policy import ObservationError, TrainedPolicy, to_json


class RequestError(ValueError):
    """A request the endpoint cannot answer: ``field`` names the culprit (a dotted JSON path)."""

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status


@dataclass
class ServedTeam:
    """Everything an endpoint may be built from; pickled into the application for the replicas."""

    policy: TrainedPolicy
    checkpoint: str
    family: str
    experiment: dict[str, Any] = field(default_factory=dict)
    """The run's resolved experiment config (``ExperimentConfig.to_dict()``)."""
    databases: dict[str, str] = field(default_factory=dict)
    """Files an endpoint answers about (``--database``), name -> path."""
    limits: ServeLimits = field(default_factory=ServeLimits)
    """What the server accepts (``orchestrl serve``'s limit options)."""


DEADLINE: ContextVar[float | None] = ContextVar("orchestrl_request_deadline", default=None)
"""The ``time.monotonic()`` by which the request being answered must end (None: no limit)."""


def remaining_s(default: float = float("inf")) -> float:
    """Seconds the request being answered has left (``default`` outside a request; at least 0)."""
    deadline = DEADLINE.get()
    return default if deadline is None else max(0.0, deadline - time.monotonic())


class Endpoint(Protocol):
    path: str
    summary: str

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]: ...


class ActEndpoint:
    """``POST /act``: observations -> the greedy joint action, for any env."""

    path = "/act"
    summary = "observations -> actions"
    concurrent = True

    def __init__(self, team: ServedTeam) -> None:
        self.policy = team.policy

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if "observations" not in body:
            raise RequestError("observations", "required: an object of agent -> observation")
        try:
            observations = self.policy.observations(body["observations"])
        except ObservationError as err:
            raise RequestError(err.field, err.message) from None
        return {"actions": to_json(self.policy.act(observations))}


def endpoint_classes(family: str) -> list[type]:
    """``/act``'s class and those ``family`` declares, in that order."""
    return [ActEndpoint, *(load(path) for path in family_endpoints(family))]


def build_endpoints(team: ServedTeam) -> dict[str, Endpoint]:
    """The endpoints of ``team``'s family, by path."""
    out: dict[str, Endpoint] = {}
    for cls in endpoint_classes(team.family):
        endpoint = cls(team)
        out[endpoint.path] = endpoint
    return out
