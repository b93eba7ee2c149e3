"""Observations as trees: an array, or a (nested) dict of arrays (``observations`` + ``action_mask``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def stack_tree(items: list[Any]) -> Any:
    """A list of (nested dict) observations -> one tree of arrays with a leading batch axis."""
    first = items[0]
    if isinstance(first, dict):
        return {k: stack_tree([item[k] for item in items]) for k in first}
    return np.stack([np.asarray(item) for item in items])


def concat_trees(trees: list[Any]) -> Any:
    """Trees of batched arrays -> one tree, batches concatenated."""
    if isinstance(trees[0], dict):
        return {k: concat_trees([t[k] for t in trees]) for k in trees[0]}
    return np.concatenate(trees)


def map_tree(tree: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn`` applied to every leaf of a nested dict."""
    if isinstance(tree, dict):
        return {k: map_tree(v, fn) for k, v in tree.items()}
    return fn(tree)
