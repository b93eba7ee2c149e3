"""Fixtures for the tests of the scripts in benchmarks/: each module runs on one torch thread (some
play short episodes in-process). Scripts are loaded by path with ``credit_helpers.load_benchmark``."""

from __future__ import annotations

from torch_threads import one_torch_thread  # noqa: F401  (autouse)
