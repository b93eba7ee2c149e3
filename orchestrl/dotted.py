"""The one loader of ``"module:attr"`` paths, by which registries name what they import lazily.

The env registry (factories, endpoints, commands) and the algorithm registry (configs, configure
functions) name code this way, so listing them imports nothing heavy, and a registry low in the
package can name code that lives above it without importing it.
"""

from __future__ import annotations

import importlib
from typing import Any


def load(path: str) -> Any:
    """The object ``attr`` of ``module`` for ``path`` = ``"module:attr"``."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"{path!r}: expected 'module:attr'")
    return getattr(importlib.import_module(module), attr)
