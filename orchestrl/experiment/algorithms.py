"""The one listing of algorithms an experiment can name (``algorithm.name`` in YAML).

Each entry pairs a small typed config class (its only knobs) with a function that shapes an RLlib
``PPOConfig``: modules, learner connectors, learner class. Entries import their algorithm package
lazily so ``orchestrl algos`` stays fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrl.dotted import load


class UnknownAlgorithmError(KeyError):
    """An experiment named an algorithm that is not registered."""


@dataclass(frozen=True)
class AlgorithmEntry:
    name: str
    summary: str
    config_path: str
    """``module:ConfigClass`` (a pydantic model forbidding unknown keys)."""
    configure_path: str
    """``module:function(ppo_config, knobs, context) -> ppo_config`` (see
    :mod:`orchestrl.algorithms.context`)."""

    @property
    def config_class(self) -> Any:
        return load(self.config_path)

    @property
    def configure(self) -> Any:
        return load(self.configure_path)


ALGORITHMS: dict[str, AlgorithmEntry] = {
    e.name: e
    for e in [
        AlgorithmEntry(
            "ippo",
            "independent PPO; shared or per-agent actors, critics on local observations",
            "orchestrl.algorithms.ippo.algorithm:IppoConfig",
            "orchestrl.algorithms.ippo.algorithm:configure_ippo",
        ),
        AlgorithmEntry(
            "mappo",
            "PPO actors + a centralised critic on the global state (all observations, agent id, t/T)",
            "orchestrl.algorithms.mappo.algorithm:MappoConfig",
            "orchestrl.algorithms.mappo.algorithm:configure_mappo",
        ),
        AlgorithmEntry(
            "coma",
            "COMA: PPO actors + a learner-only counterfactual Q critic (Foerster et al. 2018)",
            "orchestrl.algorithms.coma.algorithm:ComaConfig",
            "orchestrl.algorithms.coma.algorithm:configure_coma",
        ),
        AlgorithmEntry(
            "coma_cv",
            "COMA with each agent's baseline scaled by a control-variate coefficient fitted on the "
            "previous batch; by default the sampled TD(lambda) return as Q(s,u), centred per agent",
            "orchestrl.algorithms.coma.algorithm:ComaCvConfig",
            "orchestrl.algorithms.coma.algorithm:configure_coma",
        ),
        AlgorithmEntry(
            "lemon",
            "LEMON: PPO with exact counterfactual replay advantages from the env (executable envs)",
            "orchestrl.algorithms.lemon.algorithm:LemonConfig",
            "orchestrl.algorithms.lemon.algorithm:configure_lemon",
        ),
        AlgorithmEntry(
            "neuromas",
            "NeuroMAS: the whole team as one layered message-passing network, trained jointly",
            "orchestrl.algorithms.neuromas.algorithm:NeuromasConfig",
            "orchestrl.algorithms.neuromas.algorithm:configure_neuromas",
        ),
    ]
}


def get_algorithm(name: str) -> AlgorithmEntry:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise UnknownAlgorithmError(
            f"unknown algorithm '{name}' (registered: {', '.join(sorted(ALGORITHMS))})"
        ) from None
