"""Fixtures for every algorithm test: each module runs on one torch thread (NeuroMAS' conftest keeps
one for the whole session instead). Small experiments live in ``credit_helpers``,
``neuromas_helpers`` and ``learning_helpers`` (tests/helpers)."""

from __future__ import annotations

from torch_threads import one_torch_thread  # noqa: F401  (autouse)
