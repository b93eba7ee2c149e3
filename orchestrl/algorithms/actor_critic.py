"""The actor-critic RLModule behind every PPO-based algorithm here (ippo, mappo, coma, lemon).

One class, two switches (in the spirit of TorchRL's ``MultiAgentMLP(centralised=...)``):

- ``critic="local"`` reads the agent's own observation (IPPO);
  ``critic="central"`` reads the ``global_state`` column that a learner connector adds (MAPPO's
  centralised value function, Yu et al. 2022). Either way the critic is learner-only: env runners
  build the module with ``inference_only=True`` and carry no critic weights.
- Observations are a flat ``Box``, or a ``Dict`` with ``observations`` and a factorised 0/1
  ``action_mask`` (one slice per ``MultiDiscrete`` component): masked logits are pushed to a large
  negative number so invalid choices are never sampled and get no gradient.
- ``option_rows`` (:class:`OptionRows`): one component is chosen *given* another, by scoring a row
  of features per option with one shared network (a pointer, Vinyals et al. 2015): one softmax over
  the (given value, option) pairs, sampled autoregressively, pi(a | o) = pi(a_g | o) pi(a_c | o, a_g)
  (as AlphaStar's heads are; Vinyals et al. 2019). Acting samples a_g first and returns a_c's logits
  for it; training scores them for the action in the batch, so the distribution's inputs always
  hold the conditional that was (or would be) sampled from.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
import tree
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchMultiCategorical
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI, ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from orchestrl.envs.spaces import MASK_KEY, OBS_KEY

GLOBAL_STATE = "global_state"
"""The batch column holding the centralised critic's input (added by a learner connector)."""

MASKED_LOGIT = -1e9

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU}


def mlp(sizes: list[int], activation: str, out_gain: float = 1.0) -> nn.Sequential:
    """An MLP with orthogonal init (the PPO implementation detail that matters most)."""
    layers: list[nn.Module] = []
    for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
        last = i == len(sizes) - 2
        linear = nn.Linear(n_in, n_out)
        nn.init.orthogonal_(linear.weight, gain=out_gain if last else np.sqrt(2))
        nn.init.zeros_(linear.bias)
        layers.append(linear)
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def flat_obs_dim(space: gym.Space) -> int:
    """Size of the policy-visible part of an observation space."""
    if isinstance(space, gym.spaces.Dict):
        space = space[OBS_KEY]
    return int(np.prod(space.shape))


@dataclass(frozen=True)
class OptionRows:
    """Where the observation lists, for each value ``v >= first`` of component ``given``, one row of
    ``width`` features per value of component ``component`` (from index ``start`` of the flat
    observation, ``v`` major). Values of ``given`` below ``first`` have no rows (their
    ``component`` choice does not matter: an idle agent's duty)."""

    given: int
    component: int
    first: int
    start: int
    width: int

    @classmethod
    def parse(cls, value: Mapping[str, int] | None) -> OptionRows | None:
        return None if value is None else cls(**{k: int(v) for k, v in value.items()})

    def size(self, lens: list[int]) -> int:
        return (lens[self.given] - self.first) * lens[self.component] * self.width


def action_logit_lens(space: gym.Space) -> list[int]:
    if isinstance(space, gym.spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, gym.spaces.MultiDiscrete):
        return [int(n) for n in space.nvec.reshape(-1)]
    raise ValueError(f"actor-critic modules need Discrete or MultiDiscrete actions, got {space}")


def _inputs(batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The policy-visible observation (float) and its action mask (None without one)."""
    obs = batch[Columns.OBS]
    return (obs[OBS_KEY].float(), obs[MASK_KEY]) if isinstance(obs, dict) else (obs.float(), None)


def _repeat(batch: dict[str, Any], n: int) -> dict[str, Any]:
    """A batch of one observation repeated ``n`` times."""
    return {Columns.OBS: tree.map_structure(lambda v: v.expand(n, *v.shape[1:]), batch[Columns.OBS])}


class ActorCriticModule(TorchRLModule, ValueFunctionAPI, InferenceOnlyAPI):
    """Decentralised actor + local or centralised critic.

    ``model_config`` keys: ``hidden`` (list[int]), ``critic_hidden`` (list[int] | None),
    ``activation``, ``critic`` ("local" | "central"), ``state_dim`` (int, central only),
    ``candidate_features`` (int | None: the observation ends with one row of that many features
    per choice of a one-component action; the actor scores each row, with the part before the
    rows, by one shared MLP), ``option_rows`` (a mapping of :class:`OptionRows`' fields, or None).
    """

    actor_methods: ClassVar[tuple[str, ...]] = (
        "_actor",
        "_logits",
        "_option_parts",
        "_pick",
        "_act",
        "one_change_alternatives",
        "option_probs",
        "_forward",
        "_forward_inference",
        "_forward_exploration",
        "_forward_train",
        "_dist_cls",
        "get_inference_action_dist_cls",
        "get_exploration_action_dist_cls",
        "get_train_action_dist_cls",
    )
    """The methods that turn an observation and the actor's weights into logits and actions. A
    subclass that overrides none of them (COMA's module, which only adds its critic) acts as this
    class does, so the warm start's stored clone of one serves the other
    (:func:`orchestrl.algorithms.warm_start_store.actor_code`)."""

    def setup(self) -> None:
        cfg = self.model_config
        hidden = list(cfg.get("hidden", [64, 64]))
        activation = cfg.get("activation", "tanh")
        self.logit_lens = action_logit_lens(self.action_space)
        obs_dim = flat_obs_dim(self.observation_space)
        self.row_features = cfg.get("candidate_features")
        self.option_rows = OptionRows.parse(cfg.get("option_rows"))
        if self.option_rows:
            self._build_option_actor(obs_dim, hidden, activation)
        elif self.row_features:
            self.context_dim = obs_dim - self.logit_lens[0] * int(self.row_features)
            if len(self.logit_lens) != 1 or self.context_dim < 0:
                raise ValueError(
                    f"model.candidate_features: {self.row_features} features per choice need a "
                    f"one-component action and an observation of at least {self.logit_lens[0]} rows of "
                    f"them ({obs_dim} values)"
                )
            rows_in = self.context_dim + int(self.row_features)
            self.actor = mlp([rows_in, *hidden, 1], activation, out_gain=0.01)
        else:
            self.actor = mlp([obs_dim, *hidden, sum(self.logit_lens)], activation, out_gain=0.01)
        self.critic_kind = cfg.get("critic", "local")
        if not self.inference_only:
            critic_in = int(cfg["state_dim"]) if self.critic_kind == "central" else obs_dim
            self.critic = mlp([critic_in, *(cfg.get("critic_hidden") or hidden), 1], activation)

    def _build_option_actor(self, obs_dim: int, hidden: list[int], activation: str) -> None:
        rows, lens = self.option_rows, self.logit_lens
        if (
            len(lens) < 2
            or not 0 <= rows.given < len(lens)
            or not 0 <= rows.component < len(lens)
            or rows.given == rows.component
            or not 0 <= rows.first < lens[rows.given]
            or rows.start < 0
            or rows.start + rows.size(lens) > obs_dim
        ):
            raise ValueError(
                f"model option_rows {rows} do not fit a {len(lens)}-component action {lens} and an "
                f"observation of {obs_dim} values"
            )
        width, blocks = hidden[-1], lens[rows.given] - rows.first
        # the trunk reads the observation without the table, and each block's rows pooled (mean
        # and max): what it sees does not depend on the order the rows are listed in
        trunk_in = obs_dim - rows.size(lens) + 2 * blocks * rows.width
        trunk = mlp([trunk_in, *hidden], activation)
        trunk.append(_ACTIVATIONS[activation]())
        heads = nn.Linear(width, sum(lens) - lens[rows.component])
        nn.init.orthogonal_(heads.weight, gain=0.01)
        nn.init.zeros_(heads.bias)
        scorer = mlp([width + rows.width + blocks, width, 1], activation, out_gain=0.01)
        self.actor = nn.ModuleDict({"trunk": trunk, "heads": heads, "scorer": scorer})

    # -- actor ------------------------------------------------------------------------------------
    def _logits(self, batch: dict[str, Any], given: torch.Tensor | None = None) -> torch.Tensor:
        """Every component's logits, masked; with ``option_rows``, ``option_rows.component``'s are
        those given the value ``given`` of ``option_rows.given`` (per row of the batch; None: its
        most likely value)."""
        x, mask = _inputs(batch)
        if self.option_rows:
            return self._pick(*self._option_parts(x, mask), given, mask)
        logits = self._actor(x)
        return logits if mask is None else logits.masked_fill(mask < 0.5, MASKED_LOGIT)

    def _option_parts(self, x: torch.Tensor, mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """One softmax over (given value, option) pairs, factorised: with a_g from the heads and
        s(g, j) the scorer's value for row j of block g,

            pi(g) ∝ exp(a_g) * sum_j exp(s(g, j)),   pi(j | g) = softmax_j s(g, j),

        so pi(g, j) ∝ exp(a_g + s(g, j)). Returns every component's masked logits (the scored
        component's still zeros) and the scores, (..., blocks, options)."""
        rows, lens = self.option_rows, self.logit_lens
        blocks, n = lens[rows.given] - rows.first, lens[rows.component]
        end = rows.start + rows.size(lens)
        table = x[..., rows.start : end].reshape(*x.shape[:-1], blocks, n, rows.width)
        pooled = torch.cat([table.mean(-2), table.amax(-2)], dim=-1).flatten(-2)
        h = self.actor["trunk"](torch.cat([x[..., : rows.start], x[..., end:], pooled], -1))
        block_id = torch.eye(blocks, dtype=h.dtype, device=h.device).expand(*h.shape[:-1], blocks, blocks)
        scorer_in = torch.cat(
            [
                h[..., None, None, :].expand(*h.shape[:-1], blocks, n, h.shape[-1]),
                table,
                block_id.unsqueeze(-2).expand(*h.shape[:-1], blocks, n, blocks),
            ],
            dim=-1,
        )
        scores = self.actor["scorer"](scorer_in).squeeze(-1)
        base = self.actor["heads"](h)
        at, g_at = sum(lens[: rows.component]), sum(lens[: rows.given])
        if mask is not None:
            scores = scores.masked_fill((mask[..., at : at + n] < 0.5).unsqueeze(-2), MASKED_LOGIT)
        logits = torch.cat([base[..., :at], base.new_zeros(*base.shape[:-1], n), base[..., at:]], dim=-1)
        mass = torch.cat([base.new_zeros(*base.shape[:-1], rows.first), scores.logsumexp(-1)], dim=-1)
        pad = (g_at, logits.shape[-1] - g_at - lens[rows.given])
        logits = logits + nn.functional.pad(mass, pad)
        return (logits if mask is None else logits.masked_fill(mask < 0.5, MASKED_LOGIT)), scores

    def _pick(
        self,
        logits: torch.Tensor,
        scores: torch.Tensor,
        given: torch.Tensor | None,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """``logits`` with the scored component's filled in for ``given`` (None: the most likely
        value), masked; values below ``first`` have no rows (their logits are zeros)."""
        rows, lens = self.option_rows, self.logit_lens
        at, g_at, n = sum(lens[: rows.component]), sum(lens[: rows.given]), lens[rows.component]
        if given is None:
            given = logits[..., g_at : g_at + lens[rows.given]].argmax(-1)
        given = torch.as_tensor(given, device=logits.device).long()
        index = (given - rows.first).clamp(min=0)
        chosen = torch.take_along_dim(scores, index[..., None, None], dim=-2).squeeze(-2)
        chosen = chosen * (given >= rows.first)[..., None].to(chosen.dtype)
        logits = torch.cat([logits[..., :at], chosen, logits[..., at + n :]], dim=-1)
        return logits if mask is None else logits.masked_fill(mask < 0.5, MASKED_LOGIT)

    def _act(self, batch: dict[str, Any], explore: bool) -> dict[str, Any]:
        """``option_rows``: the given component first (sampled, or its most likely value), then every
        component from the logits for it; the actions, their log-probability and the logits they
        came from, so RLlib's ``GetActions`` samples nothing again."""
        rows, lens = self.option_rows, self.logit_lens
        x, mask = _inputs(batch)
        logits, scores = self._option_parts(x, mask)
        g_at = sum(lens[: rows.given])
        g_logits = logits[..., g_at : g_at + lens[rows.given]]
        given = TorchCategorical(logits=g_logits).sample() if explore else g_logits.argmax(-1)
        logits = self._pick(logits, scores, given, mask)
        dist = self._dist_cls().from_logits(logits)
        actions = dist.sample() if explore else dist.to_deterministic().sample()
        actions[..., rows.given] = given
        out = {Columns.ACTIONS: actions, Columns.ACTION_DIST_INPUTS: logits}
        if explore:
            out[Columns.ACTION_LOGP] = dist.logp(actions)
        return out

    def option_probs(self, batch: dict[str, Any]) -> torch.Tensor | None:
        """With ``option_rows``: pi(a_c | o, a_g) for every value a_g of the given component,
        ``[..., lens[given], lens[component]]`` (None without). A value below ``first`` has no rows:
        acting draws its component from zero logits, masked (uniform over the allowed options), and
        so does this. What a learner needs to marginalise over the agent's own action, since
        pi(a | o) is pi(a_g | o) pi(a_c | o, a_g) and not a product of per-component marginals."""
        if not self.option_rows:
            return None
        rows, lens = self.option_rows, self.logit_lens
        x, mask = _inputs(batch)
        _, scores = self._option_parts(x, mask)
        at, n = sum(lens[: rows.component]), lens[rows.component]
        unscored = scores.new_zeros(*scores.shape[:-2], rows.first, n)
        if mask is not None:
            unscored = unscored.masked_fill((mask[..., at : at + n] < 0.5).unsqueeze(-2), MASKED_LOGIT)
        return torch.softmax(torch.cat([unscored, scores], dim=-2), dim=-1)

    def one_change_alternatives(
        self, batch: dict[str, Any], action: torch.Tensor, per_component: int = 2
    ) -> list[tuple[float, torch.Tensor]]:
        """The policy's next guesses after ``action`` for the one observation in ``batch``: each
        action that moves one component to one of its ``per_component`` most likely other allowed
        values, with log pi(alternative | o) - log pi(action | o), most likely first. With
        ``option_rows`` a new value of the given component takes the scored component's most likely
        value under it (the greedy decode's rule), and the scored component of a value with no rows
        (an idle agent's duty) has no alternatives."""
        lens, rows, shape = self.logit_lens, self.option_rows, action.shape
        action = action.reshape(-1).long()  # a Discrete action is one component
        given = action[rows.given].view(1) if rows else None
        logits = self._logits(batch, given=given)[0]
        bounds = np.cumsum([0, *lens])
        candidates = []
        for c in range(len(lens)):
            if rows and c == rows.component and int(action[rows.given]) < rows.first:
                continue
            values = logits[bounds[c] : bounds[c + 1]]
            allowed = [int(v) for v in torch.argsort(values, descending=True) if values[v] > MASKED_LOGIT / 2]
            for value in [v for v in allowed if v != int(action[c])][:per_component]:
                alternative = action.clone()
                alternative[c] = value
                candidates.append(alternative)
        if not candidates:
            return []
        actions = torch.stack([action, *candidates])
        logits = self._logits(_repeat(batch, len(actions)), given=actions[:, rows.given] if rows else None)
        if rows:  # a new given value re-decides the component scored under it (each row's logits are)
            moved = actions[:, rows.given] != action[rows.given]
            at = bounds[rows.component]
            actions[moved, rows.component] = logits[moved, at : at + lens[rows.component]].argmax(-1)
        logp = self._dist_cls().from_logits(logits).logp(actions.reshape(len(actions), *shape))
        drops = (logp[1:] - logp[0]).tolist()
        ranked = sorted(zip(drops, actions[1:], strict=True), key=lambda pair: -pair[0])
        return [(drop, alternative.reshape(shape)) for drop, alternative in ranked]

    def _actor(self, x: torch.Tensor) -> torch.Tensor:
        if not self.row_features:
            return self.actor(x)
        context, rows = x[..., : self.context_dim], x[..., self.context_dim :]
        rows = rows.reshape(*x.shape[:-1], self.logit_lens[0], int(self.row_features))
        context = context.unsqueeze(-2).expand(*rows.shape[:-1], self.context_dim)
        return self.actor(torch.cat([context, rows], dim=-1)).squeeze(-1)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self._logits(batch)}

    def _forward_inference(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._act(batch, explore=False) if self.option_rows else self._forward(batch)

    def _forward_exploration(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return self._act(batch, explore=True) if self.option_rows else self._forward(batch)

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """With ``option_rows`` the rows are scored for the actions in the batch (the ones taken,
        or the labels being cloned), so ``logp`` of those actions is the factorised one."""
        actions = batch.get(Columns.ACTIONS) if self.option_rows else None
        given = None if actions is None else torch.as_tensor(actions)[..., self.option_rows.given]
        return {Columns.ACTION_DIST_INPUTS: self._logits(batch, given=given)}

    def _dist_cls(self):
        if len(self.logit_lens) == 1 and isinstance(self.action_space, gym.spaces.Discrete):
            return TorchCategorical
        return TorchMultiCategorical.get_partial_dist_cls(input_lens=self.logit_lens)

    def get_inference_action_dist_cls(self):
        return self._dist_cls()

    def get_exploration_action_dist_cls(self):
        return self._dist_cls()

    def get_train_action_dist_cls(self):
        return self._dist_cls()

    # -- critic -----------------------------------------------------------------------------------
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if self.critic_kind == "central":
            critic_in = batch[GLOBAL_STATE]
        else:
            obs = batch[Columns.OBS]
            critic_in = obs[OBS_KEY] if isinstance(obs, dict) else obs
        return self.critic(critic_in.float()).squeeze(-1)

    def get_non_inference_attributes(self) -> list[str]:
        return ["critic"]
