"""The fixture that runs each test module on one torch thread, for the conftests that use it
(tests/algorithms, tests/benchmarks): ``from torch_threads import one_torch_thread``."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny networks on a shared 2-core machine: torch's thread pool only adds contention
    (measured: sampling 400 one-step episodes took 9.8 s with the default pool, 2.4 s with one)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
