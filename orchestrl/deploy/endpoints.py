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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

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


class Endpoint(Protocol):
    path: str
    summary: str

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]: ...


class ActEndpoint:
    """``POST /act``: observations -> the greedy joint action, for any env."""

    path = "/act"
    summary = "observations -> actions"

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
