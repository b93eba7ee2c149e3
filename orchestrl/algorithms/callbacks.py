"""Composing RLlib callbacks: each piece of an algorithm adds its own class.

RLlib 2.60 takes a list of callback classes (``config.callbacks(callbacks_class=[...])``) and calls
each in order, so an algorithm's credit table, its replay of edited specs and its warm start are
separate classes that never subclass one another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ray.rllib.callbacks.callbacks import RLlibCallback

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig


def with_callbacks(ppo: PPOConfig, *classes: type[RLlibCallback]) -> PPOConfig:
    """``ppo`` with ``classes`` appended to its callback classes (each class at most once)."""
    current = ppo.callbacks_class
    existing = list(current) if isinstance(current, list | tuple) else [current]
    existing = [c for c in existing if c is not None and c is not RLlibCallback]
    return ppo.callbacks(callbacks_class=existing + [c for c in classes if c not in existing])
