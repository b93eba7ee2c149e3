"""Composing RLlib callbacks: each piece of an algorithm adds its own class.

RLlib 2.60 takes a list of callback classes (``config.callbacks(callbacks_class=[...])``) and calls
each in order, so an algorithm's credit table, its replay of edited specs and its warm start are
separate classes that never subclass one another. RLlib only calls each entry with no arguments,
so a callbacks class with settings of its own is entered as a factory (a ``functools.partial`` of
the class and its settings, e.g. ``ReplayCallbacks.with_settings``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ray.rllib.callbacks.callbacks import RLlibCallback

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

CREDIT_TABLE_KEY = "credit_table"
"""Where an algorithm's callback puts its per-agent credit rows in a training iteration's result;
the training loop writes them as the run's credit-table artifact whatever the algorithm."""


def with_callbacks(ppo: PPOConfig, *classes: Callable[[], RLlibCallback]) -> PPOConfig:
    """``ppo`` with ``classes`` (classes or factories) appended to its callback classes (each at
    most once)."""
    current = ppo.callbacks_class
    existing = list(current) if isinstance(current, list | tuple) else [current]
    existing = [c for c in existing if c is not None and c is not RLlibCallback]
    return ppo.callbacks(callbacks_class=existing + [c for c in classes if c not in existing])
