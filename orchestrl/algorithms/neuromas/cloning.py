"""NeuroMAS' behaviour-cloning loss: the whole team graph fitted to the env expert's joint actions.

The demonstrations, the settings (the ``warm_start:`` section) and the hook that runs this once the
algorithm is built are shared with every algorithm (:mod:`orchestrl.algorithms.behaviour_cloning`).
What is NeuroMAS' own is the loss, which maximises the log-likelihood of the expert's joint action
under the team graph:

    L_BC = -E_(s, a*) ~ D [ sum_c log pi_c(a*_c | s) ]         (env components c only)

Discrete message tokens are latent here (the expert says nothing about them): the graph runs with
straight-through Gumbel-softmax messages (Jang et al. 2017), so the message heads are trained by
backpropagation through the same loss. Known words are dropped to the "unknown" embedding at random
(``token_dropout``) so the policy learns to read around words it has never seen.

The heads that judge the team are fitted on the same demonstrations, on the node states detached
(so the policy's updates are those of cloning alone): the global critic to the expert's discounted
returns, the auxiliary head (if any) to its rewards,

    L_V = E_(s, G*) ~ D [ (V(s) - G*)^2 ]          L_aux = E_(s, r*) ~ D [ (r_hat(s) - r*)^2 ]

With validation demonstrations (the expert on other tasks: ``bc_validation_env`` in the
algorithm's knobs, e.g. Text2SQL's ``validation`` split of unseen schemas, and a dev set of
questions written by hand), cloning stops early: after each epoch the greedy team's exact agreement
with the expert's joint action on them is measured (the mean over the validation sets, each weighing
the same), and when it has not improved for ``patience`` epochs the best epoch's weights are put
back (``warm_start.epochs`` is then the most it runs).

Why: RL starts with heads that already fit the cloned policy's outcomes. The auxiliary head reads
the node states WITH gradient (shaping them is its purpose); left untrained, its large initial
error flows into every node's state during the first PPO updates, while the policy gradient of a
cloned policy that almost always succeeds is tiny, so it dominates the update and erodes what
cloning learnt. On Text2SQL, the cloned NeuroMAS-5 and -7 kept their test accuracy through the
first PPO iterations only with both heads fitted (``benchmarks/neuromas.py`` trains this path).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.behaviour_cloning import Demonstrations
from orchestrl.algorithms.context import WarmStartSection


def behaviour_cloning(
    module: Any,
    demos: Demonstrations,
    settings: WarmStartSection,
    *,
    env_components: int,
    token_dropout: float = 0.1,
    seed: int = 0,
    validation: Sequence[Demonstrations] = (),
    patience: int = 3,
    max_seconds: float | None = None,
) -> dict[str, list[float]]:
    """Fits ``module`` (a :class:`.module.NeuromasModule`) to ``demos`` in place: the policy to the
    expert's actions (the first ``env_components`` of each joint action; the rest are message
    slots), the critic to its returns and the auxiliary head to its rewards, both on the node states
    detached. Returns each loss's mean per epoch (``bc``, ``value``, ``aux``), and with
    ``validation`` sets each epoch's ``validation_agreement`` (the mean over the sets) and the
    ``best_epoch`` (1-based) kept.
    ``max_seconds``: stop after the minibatch that spends that much wall time (cloning continued for
    as long as something else ran: the control of an RL phase)."""
    generator = np.random.default_rng(seed)
    torch.manual_seed(seed)
    policy = [p for p in module.net.parameters() if p.requires_grad]
    heads = [module.critic] + ([module.aux_head] if module.aux_head is not None else [])
    judges = [p for head in heads for p in head.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(policy + judges, lr=settings.lr)
    mode = "gumbel" if module.discrete else "greedy"
    dist_cls = module.env_action_dist_cls()
    losses = ("bc", "value", *(("aux",) if len(heads) > 1 else ()))
    history: dict[str, list[float]] = {key: [] for key in losses}
    if validation:
        history["validation_agreement"] = []
    best: tuple[tuple[float, float], int, dict[str, torch.Tensor]] | None = None
    module.train()
    deadline = None if max_seconds is None else time.perf_counter() + max_seconds
    for epoch in range(settings.epochs):
        order = generator.permutation(len(demos))
        totals = dict.fromkeys(losses, 0.0)
        for start in range(0, len(order), settings.batch_size):
            if deadline is not None and time.perf_counter() >= deadline:
                break
            index = order[start : start + settings.batch_size]
            obs, actions = demos.batch(index)
            actions = actions[:, :env_components]
            batch = {Columns.OBS: obs}
            given = actions if module.sequential else None  # teacher forcing
            out = module.run_graph(batch, mode, token_dropout=token_dropout, actions=given)
            bc = -dist_cls.from_logits(out.env_logits).logp(actions).mean()
            fits = {"value": F.mse_loss(values(module, batch, out), torch.as_tensor(demos.returns[index]))}
            if module.aux_head is not None:
                predicted = module.reward_prediction(batch, out.states.detach())
                fits["aux"] = F.mse_loss(predicted, torch.as_tensor(demos.rewards[index]))
            optimiser.zero_grad()
            bc.backward()
            torch.nn.utils.clip_grad_norm_(policy, 1.0)
            sum(fits.values()).backward()  # reaches the heads and their attention pool only
            torch.nn.utils.clip_grad_norm_(judges, 1.0)
            optimiser.step()
            for key, loss in {"bc": bc, **fits}.items():
                totals[key] += loss.item() * len(index)
        for key in totals:
            history[key].append(totals[key] / len(demos))
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if not validation:
            continue
        per_set = [agreement(module, check, env_components) for check in validation]
        score = (float(np.mean([a for a, _ in per_set])), float(np.mean([c for _, c in per_set])))
        history["validation_agreement"].append(score[0])
        module.train()
        if best is None or score > best[0]:  # ties on whole actions go to more components right
            best = (score, epoch, copy.deepcopy(module.state_dict()))
        elif epoch - best[1] >= patience:
            break
    if best is not None:
        module.load_state_dict(best[2])
        history["best_epoch"] = [best[1] + 1]
    module.eval()
    return history


def agreement(module: Any, demos: Demonstrations, env_components: int) -> tuple[float, float]:
    """How the greedy team agrees with the expert on ``demos``: the share of demonstrations whose
    every env component it chooses as the expert did, and the share of components (one pass)."""
    module.eval()
    same = []
    with torch.no_grad():
        for start in range(0, len(demos), 256):
            obs, actions = demos.batch(slice(start, start + 256))
            out = module.run_graph({Columns.OBS: obs}, "greedy")
            chosen = out.actions
            if chosen is None:
                chosen = module.env_action_dist_cls().from_logits(out.env_logits).to_deterministic().sample()
            same.append(chosen == actions[:, :env_components])
    matches = torch.cat(same)
    return float(matches.all(-1).float().mean()), float(matches.float().mean())


def values(module: Any, batch: dict[str, Any], out: Any) -> torch.Tensor:
    """V(s) as the PPO loss computes it (discrete messages: recomputed with expected tokens)."""
    return module.compute_values(batch, None if module.discrete else out.states)
