"""Helpers shared by the NeuroMAS tests."""

from __future__ import annotations

import torch


def trivial_agreement(expert: torch.Tensor) -> float:
    """The best a policy that ignores its observation can agree with ``expert`` (N, components):
    every component's most common value, measured on these very actions (so never beaten by chance).
    Always choosing 0 is one such policy and scores no more (0.66 on Text2SQL: most components are
    0 for most questions)."""
    modes = torch.mode(expert, dim=0).values
    best = float((expert == modes).float().mean())
    assert best >= float((expert == 0).float().mean())
    return best
