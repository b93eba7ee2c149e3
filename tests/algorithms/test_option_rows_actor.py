"""``model.option_rows``: an agent's duty is scored row by row given the role it chose (an
autoregressive pointer), acting samples the role first, and training scores the rows for the role in
the batch (no Ray: the module is built directly)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from orchestrl.algorithms.actor_critic import ActorCriticModule
from orchestrl.algorithms.behaviour_cloning import Demonstrations, clone_actors
from orchestrl.algorithms.context import WarmStartSection
from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

ROLES, DUTIES, OTHER, WIDTH, CONTEXT = 3, 4, 2, 3, 2
"""Role: idle + 3 roles (the given component); duty: 4 options (scored by rows); one more component."""
LENS = [1 + ROLES, DUTIES, OTHER]
ROWS = {"given": 0, "component": 1, "first": 1, "start": CONTEXT, "width": WIDTH}
OBS = CONTEXT + ROLES * DUTIES * WIDTH


def module(rows: dict[str, int] | None = ROWS, hidden: int = 16) -> ActorCriticModule:
    space = gym.spaces.Dict(
        {
            OBS_KEY: gym.spaces.Box(-5.0, 5.0, shape=(OBS,), dtype=np.float32),
            MASK_KEY: gym.spaces.Box(0.0, 1.0, shape=(sum(LENS),), dtype=np.float32),
        }
    )
    torch.manual_seed(0)
    return ActorCriticModule(
        observation_space=space,
        action_space=gym.spaces.MultiDiscrete(LENS),
        inference_only=False,
        model_config={"hidden": [hidden], "activation": "tanh", "option_rows": rows},
    )


def randomised(net: ActorCriticModule) -> ActorCriticModule:
    for p in net.actor.parameters():  # off the near-zero output init, so logits differ
        torch.nn.init.normal_(p)
    return net


def observation(table: torch.Tensor, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """``table``: (batch, ROLES, DUTIES, WIDTH)."""
    batch = table.shape[0]
    flat = torch.cat([torch.zeros(batch, CONTEXT), table.reshape(batch, -1)], dim=-1)
    return {OBS_KEY: flat, MASK_KEY: torch.ones(batch, sum(LENS)) if mask is None else mask}


def duty_logits(net: ActorCriticModule, obs: dict[str, torch.Tensor], role: int) -> torch.Tensor:
    given = torch.full((obs[OBS_KEY].shape[0],), role)
    return net._logits({Columns.OBS: obs}, given=given)[:, LENS[0] : LENS[0] + DUTIES]


def test_a_duty_keeps_its_logit_wherever_its_row_is_listed() -> None:
    net = randomised(module())
    table = torch.randn(2, ROLES, DUTIES, WIDTH)
    order = torch.tensor([2, 0, 3, 1])
    before = duty_logits(net, observation(table), role=2)
    after = duty_logits(net, observation(table[:, :, order]), role=2)
    torch.testing.assert_close(after, before[:, order])
    assert not torch.allclose(before[:, 0], before[:, 1])


def test_a_role_carries_the_mass_of_its_duties_and_a_duty_is_scored_within_its_role() -> None:
    """pi(role, duty) is one softmax over the pairs, pi ∝ exp(a_role + s(role, duty)): masking a
    duty out lowers each role's logit by exactly that duty's share of the role's mass; and what an
    agent does with one role does not hang on the order another role's rows are listed in."""
    net = randomised(module())
    table = torch.randn(1, ROLES, DUTIES, WIDTH)
    obs = observation(table)
    mask = torch.ones(1, sum(LENS))
    mask[:, LENS[0] + 1] = 0.0  # duty 1 out
    masked = observation(table, mask)
    roles_all = net._logits({Columns.OBS: obs})[0, : LENS[0]]
    roles_masked = net._logits({Columns.OBS: masked})[0, : LENS[0]]
    for role in range(1, 1 + ROLES):
        s = duty_logits(net, obs, role)[0]
        share = s.logsumexp(-1) - s[torch.tensor([0, 2, 3])].logsumexp(-1)
        torch.testing.assert_close(roles_all[role] - roles_masked[role], share)
    torch.testing.assert_close(roles_all[0], roles_masked[0])  # idle has no duties
    shuffled = table.clone()
    shuffled[:, 2] = table[:, 2, torch.tensor([3, 1, 0, 2])]
    for role in (1, 2):
        torch.testing.assert_close(duty_logits(net, observation(shuffled), role), duty_logits(net, obs, role))
    # idle (value 0, below ``first``) has no rows: its duty logits are zeros whatever the table
    torch.testing.assert_close(
        duty_logits(net, observation(torch.randn(1, ROLES, DUTIES, WIDTH)), 0), torch.zeros(1, DUTIES)
    )


def test_acting_samples_the_role_first_and_returns_the_logp_of_what_it_played() -> None:
    net = randomised(module())
    mask = torch.ones(64, sum(LENS))
    mask[:, 0] = 0.0  # idle not allowed
    mask[:, LENS[0] + 3] = 0.0  # the last duty not allowed
    obs = observation(torch.randn(64, ROLES, DUTIES, WIDTH), mask)
    out = net.forward_exploration({Columns.OBS: obs})
    actions = out[Columns.ACTIONS]
    assert (actions[:, 0] != 0).all() and (actions[:, 1] != 3).all()
    conditioned = net._logits({Columns.OBS: obs}, given=actions[:, 0])
    torch.testing.assert_close(out[Columns.ACTION_DIST_INPUTS], conditioned)
    dist = net.get_train_action_dist_cls().from_logits(conditioned)
    torch.testing.assert_close(out[Columns.ACTION_LOGP], dist.logp(actions))
    train = net.forward_train({Columns.OBS: obs, Columns.ACTIONS: actions})[Columns.ACTION_DIST_INPUTS]
    torch.testing.assert_close(train, conditioned)  # PPO's ratio compares the same conditional
    greedy = net.forward_inference({Columns.OBS: obs})[Columns.ACTIONS]
    best_role = out[Columns.ACTION_DIST_INPUTS][:, : LENS[0]].argmax(-1)
    torch.testing.assert_close(greedy[:, 0], best_role)
    torch.testing.assert_close(
        greedy[:, 1],
        net._logits({Columns.OBS: obs}, given=best_role)[:, LENS[0] : LENS[0] + DUTIES].argmax(-1),
    )


def test_cloning_learns_a_duty_that_depends_on_the_role() -> None:
    """The label's duty is the row with the largest first feature among the rows of the label's
    role: only a policy that scores the duty given the role can fit it."""
    generator = np.random.default_rng(0)
    n = 512
    table = generator.normal(size=(n, ROLES, DUTIES, WIDTH)).astype(np.float32)
    roles = generator.integers(1, 1 + ROLES, size=n)
    duties = table[np.arange(n), roles - 1, :, 0].argmax(-1)
    actions = np.stack([roles, duties, np.zeros(n, dtype=np.int64)], axis=1)
    flat = np.concatenate([np.zeros((n, CONTEXT), np.float32), table.reshape(n, -1)], axis=1)
    obs = {OBS_KEY: flat, MASK_KEY: np.ones((n, sum(LENS)), np.float32)}
    zeros = np.zeros(n, np.float32)
    demos = {"a": Demonstrations(obs=obs, actions=actions, rewards=zeros, returns=zeros)}
    net = module(hidden=32)
    clone_actors(
        {"m": net}, demos, lambda agent: "m", WarmStartSection(episodes=1, epochs=60, lr=3e-3), seed=0
    )
    logits = net._logits(
        {Columns.OBS: {k: torch.as_tensor(v) for k, v in obs.items()}}, given=torch.as_tensor(roles)
    )
    chosen = logits[:, LENS[0] : LENS[0] + DUTIES].argmax(-1).numpy()
    assert (chosen == duties).mean() > 0.9


@pytest.mark.parametrize(
    "rows",
    [
        {**ROWS, "start": OBS},  # the table runs past the observation
        {**ROWS, "given": 1},  # a component given itself
        {**ROWS, "component": 3},  # no such component
        {**ROWS, "first": 4},  # no value of the given component has rows
    ],
)
def test_option_rows_that_do_not_fit_are_refused(rows: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="option_rows"):
        module(rows)


def brute_force_alternatives(net: ActorCriticModule, obs: dict[str, torch.Tensor], action: torch.Tensor):
    """Every action one component away from ``action`` (a new role taking its most likely duty), with
    its logp drop, by scoring each one on its own."""

    @torch.no_grad()
    def logp(a: torch.Tensor) -> float:
        logits = net._logits({Columns.OBS: obs}, given=a[:1])
        return float(net.get_train_action_dist_cls().from_logits(logits).logp(a[None]))

    out = {}
    for c, n in enumerate(LENS):
        for value in range(n):
            if value == int(action[c]) or obs[MASK_KEY][0, sum(LENS[:c]) + value] < 0.5:
                continue
            if c == 1 and int(action[0]) == 0:
                continue  # an idle agent's duty: no rows
            alt = action.clone()
            alt[c] = value
            if c == 0:
                alt[1] = duty_logits(net, obs, value)[0].argmax()
            out[tuple(alt.tolist())] = logp(alt) - logp(action)
    return out


@pytest.mark.parametrize("role", [0, 2])
def test_one_change_alternatives_are_the_policy_s_next_most_likely_actions(role: int) -> None:
    """Each alternative moves one component (a new role re-picks its duty as the greedy decode
    does), to one of that component's most likely other allowed values, and carries exactly its
    logp drop; most likely first; masked values never appear; an idle agent's duty has none."""
    net = randomised(module())
    mask = torch.ones(1, sum(LENS))
    mask[:, LENS[0] + 2] = 0.0  # duty 2 out
    obs = observation(torch.randn(1, ROLES, DUTIES, WIDTH), mask)
    action = torch.tensor([role, 0 if role == 0 else 1, 1])
    truth = brute_force_alternatives(net, obs, action)
    with torch.no_grad():
        ranked = net.one_change_alternatives({Columns.OBS: obs}, action, per_component=2)
    drops = [d for d, _ in ranked]
    assert drops == sorted(drops, reverse=True)
    for drop, alt in ranked:
        key = tuple(alt.tolist())
        assert key in truth, key
        assert drop == pytest.approx(truth[key], abs=1e-4)
    assert all(int(alt[1]) != 2 for _, alt in ranked)
    if role == 0:
        assert all(int(alt[1]) == int(action[1]) for _, alt in ranked if int(alt[0]) == 0)
    by_component: dict[int, list[float]] = {}
    for key, drop in truth.items():
        changed = 0 if key[0] != role else next(c for c in range(1, 3) if key[c] != int(action[c]))
        by_component.setdefault(changed, []).append(drop)
    expected = sum(min(2, len(v)) for v in by_component.values())
    assert len(ranked) == expected
    for c, values in by_component.items():  # the kept ones are each component's most likely
        kept = [d for d, alt in ranked if (alt[0] != role) == (c == 0) and (c == 0 or alt[c] != action[c])]
        assert sorted(kept, reverse=True) == pytest.approx(
            sorted(values, reverse=True)[: len(kept)], abs=1e-4
        )


def test_option_probs_are_the_duty_given_each_role_acting_would_draw_from() -> None:
    """``option_probs``: pi(duty | role) for every role at once, what the logits for that role give,
    masked duties at 0; the idle role's duty is uniform over the allowed ones, as acting draws it."""
    net = randomised(module())
    table = torch.randn(2, ROLES, DUTIES, WIDTH)
    mask = torch.ones(2, sum(LENS))
    mask[1, LENS[0] + 2] = 0.0  # duty 2 out for the second observation
    obs = observation(table, mask)
    probs = net.option_probs({Columns.OBS: obs})
    assert probs.shape == (2, 1 + ROLES, DUTIES)
    for role in range(1 + ROLES):
        torch.testing.assert_close(probs[:, role], torch.softmax(duty_logits(net, obs, role), dim=-1))
    torch.testing.assert_close(probs[0, 0], torch.full((DUTIES,), 1 / DUTIES))
    torch.testing.assert_close(probs[1, 0], torch.tensor([1 / 3, 1 / 3, 0.0, 1 / 3]))
    assert not torch.allclose(probs[0, 1], probs[0, 2])  # the duty's distribution depends on the role
    assert module(rows=None).option_probs({Columns.OBS: observation(table)}) is None
