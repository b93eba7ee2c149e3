"""The maths of mpe2's simple_spread, simple_speaker_listener and simple_reference, for N copies at once.

Everything here is a tensor operation over a leading copy dimension ``N``; nothing loops over copies
or agents in Python. Each scenario is one class that holds all of its maths: its world layout, its
initial state, its observations, its rewards and when it terminates. The physics every scenario
shares is :func:`step_world`. Both follow mpe2 1.1 (``mpe2/_mpe_utils/core.py``,
``simple_env.py`` and each scenario's file) term by term, in float64 like mpe2's numpy state, so
observations and rewards agree with mpe2's to rounding (``tests/envs/batched`` checks it step by step).

World physics (mpe2 ``World.step``), per movable agent ``i`` with action force ``u_i`` (a discrete
move times the sensitivity 5) and, for colliding pairs, the soft contact force
``f_ij = c * (p_i - p_j) / d_ij * k * log(1 + exp(-(d_ij - (s_i + s_j)) / k))`` (``c = 100``,
``k = 1e-3``)::

    p <- p + v * dt
    v <- v * (1 - damping) + (u + sum_j f_ij) / m * dt        (dt = 0.1, damping = 0.25, m = 1)

A speaking agent's communication state becomes the one-hot of its message; a silent agent's is zero.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import torch

DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0
MOVES = 5
"""Discrete moves: none, left, right, down, up."""
DIM_P = 2
DTYPE = torch.float64


@dataclass
class World:
    """The state of N copies of one scenario's world (``[N, ...]`` tensors)."""

    pos: torch.Tensor
    """Agent positions, ``[N, A, 2]``."""
    vel: torch.Tensor
    """Agent velocities, ``[N, A, 2]``."""
    comm: torch.Tensor
    """Agent communication states, ``[N, A, dim_c]``."""
    landmarks: torch.Tensor
    """Landmark positions, ``[N, L, 2]``."""
    goals: torch.Tensor
    """Per-scenario goal landmark indices, ``[N, G]`` (int64; ``G = 0`` where there are none)."""

    def where(self, mask: torch.Tensor, other: World) -> World:
        """This world with the copies in ``mask`` (``[N]`` bool) taken from ``other``."""
        out = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            shape = (-1,) + (1,) * (mine.dim() - 1)
            out[f.name] = torch.where(mask.view(shape), theirs, mine)
        return World(**out)


@dataclass(frozen=True)
class Layout:
    """A scenario's layout as tensors (what moves, speaks and collides; contact distances)."""

    movable: torch.Tensor
    """``[A]`` bool."""
    speaks: torch.Tensor
    """``[1, A, 1]`` bool: not silent."""
    touch: torch.Tensor
    """``[A, A]``: ``s_i + s_j``, the distance under which two agents touch."""
    eye: torch.Tensor
    """``[A, A]`` bool identity."""
    pairs: torch.Tensor
    """``[A, A]``: 1 where two different agents both collide."""
    collides: bool
    """Whether any two agents collide."""
    moves: torch.Tensor
    """``[MOVES, 2]``: each discrete move's force (unit direction times the sensitivity)."""


class Scenario:
    """One MPE scenario: its layout (agents, landmarks, what moves, speaks and collides) and its maths.

    Subclasses set the layout in ``__init__`` and implement ``goals``, ``observe`` and ``rewards``.
    """

    name: str
    agents: tuple[str, ...]
    n_landmarks: int
    dim_c: int
    movable: tuple[bool, ...]
    silent: tuple[bool, ...]
    size: tuple[float, ...]
    collide: tuple[bool, ...]
    max_cycles: int

    @cached_property
    def layout(self) -> Layout:
        """The layout as tensors, built once."""
        a = len(self.agents)
        size = torch.tensor(self.size, dtype=DTYPE)
        eye = torch.eye(a, dtype=torch.bool)
        collide = torch.tensor(self.collide)
        return Layout(
            movable=torch.tensor(self.movable),
            speaks=~torch.tensor(self.silent).view(1, -1, 1),
            touch=size[:, None] + size[None],
            eye=eye,
            pairs=(collide[:, None] & collide[None] & ~eye).to(DTYPE),
            collides=int(collide.sum()) > 1,
            moves=torch.tensor([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=DTYPE) * SENSITIVITY,
        )

    def action_sizes(self) -> tuple[int, ...]:
        """Each agent's ``Discrete`` size, as mpe2 builds it: moves x messages."""
        out = []
        for movable, silent in zip(self.movable, self.silent, strict=True):
            n = MOVES if movable else 1
            out.append(n if silent else n * self.dim_c)
        return tuple(out)

    def goals(self, n: int, gen: torch.Generator) -> torch.Tensor:
        """``[n, G]`` goal landmark indices for fresh copies."""
        return torch.zeros(n, 0, dtype=torch.int64)

    def initial(self, n: int, gen: torch.Generator) -> World:
        """Fresh copies: agents and landmarks uniform in ``[-1, 1]^2``, at rest, silent."""
        a = len(self.agents)
        return World(
            pos=torch.rand(n, a, DIM_P, generator=gen, dtype=DTYPE) * 2 - 1,
            vel=torch.zeros(n, a, DIM_P, dtype=DTYPE),
            comm=torch.zeros(n, a, self.dim_c, dtype=DTYPE),
            landmarks=torch.rand(n, self.n_landmarks, DIM_P, generator=gen, dtype=DTYPE) * 2 - 1,
            goals=self.goals(n, gen),
        )

    def observe(self, w: World) -> list[torch.Tensor]:
        """Each agent's observation, ``[N, D_a]`` (float64), in ``agents`` order."""
        raise NotImplementedError

    def rewards(self, w: World) -> torch.Tensor:
        """``[N, A]`` rewards after a world step (mpe2's local/global mix included)."""
        raise NotImplementedError

    def terminal(self, w: World) -> torch.Tensor | None:
        """``[N]`` bool: copies that ended early (None: episodes only end at ``max_cycles``)."""
        return None


def landmark_offsets(w: World, agent: int) -> torch.Tensor:
    """``[N, 2L]``: every landmark's position relative to ``agent``."""
    return (w.landmarks - w.pos[:, agent : agent + 1]).flatten(1)


def pair_distances(w: World) -> torch.Tensor:
    """``[N, A, A]`` distances between agents."""
    return torch.linalg.vector_norm(w.pos[:, :, None] - w.pos[:, None], dim=-1)


def step_world(s: Scenario, w: World, actions: torch.Tensor) -> World:
    """One mpe2 world step of every copy under ``actions`` (``[N, A]`` int64 discrete actions)."""
    lay = s.layout
    move = torch.where(lay.movable, actions % MOVES, 0)
    message = torch.where(lay.movable, actions // MOVES, actions)
    force = lay.moves[move]  # [N, A, 2]
    if lay.collides:
        force = force + contact_forces(lay, w)
    step = lay.movable.view(1, -1, 1)
    pos = torch.where(step, w.pos + w.vel * DT, w.pos)
    vel = torch.where(step, w.vel * (1 - DAMPING) + force * DT, w.vel)  # mass 1
    if s.dim_c and bool(lay.speaks.any()):
        one_hot = torch.nn.functional.one_hot(message.clamp(max=s.dim_c - 1), s.dim_c).to(DTYPE)
        comm = torch.where(lay.speaks, one_hot, 0.0)
    else:
        comm = w.comm
    return World(pos=pos, vel=vel, comm=comm, landmarks=w.landmarks, goals=w.goals)


def contact_forces(lay: Layout, w: World) -> torch.Tensor:
    """``[N, A, 2]``: the summed soft contact force on each agent from every other colliding agent."""
    delta = w.pos[:, :, None] - w.pos[:, None]  # [N, A, A, 2]: p_i - p_j
    dist = torch.linalg.vector_norm(delta, dim=-1).masked_fill(lay.eye, 1.0)
    penetration = torch.nn.functional.softplus(-(dist - lay.touch) / CONTACT_MARGIN, threshold=50.0)
    magnitude = CONTACT_FORCE * CONTACT_MARGIN * penetration / dist * lay.pairs
    return (delta * magnitude[..., None]).sum(dim=2)


def nearest(offsets: torch.Tensor, values: list[torch.Tensor], k: int) -> list[torch.Tensor]:
    """Each of ``values`` (``[N, A, E, d]``) for the ``k`` entities nearest to each agent (by the
    length of ``offsets``, ``[N, A, E, 2]``), closest first, zero-padded to ``k`` (mpe2
    ``partial_observability``)."""
    order = torch.argsort(torch.linalg.vector_norm(offsets, dim=-1), dim=2, stable=True)[:, :, :k]
    out = []
    for v in values:
        picked = torch.gather(v, 2, order[..., None].expand(-1, -1, -1, v.shape[-1]))
        if picked.shape[2] < k:
            pad = picked.new_zeros(*picked.shape[:2], k - picked.shape[2], picked.shape[3])
            picked = torch.cat([picked, pad], dim=2)
        out.append(picked)
    return out


class SimpleSpread(Scenario):
    """N agents cover N landmarks (mpe2 ``simple_spread_v3``).

    Observation of agent i: ``[v_i, p_i, (l_k - p_i)_k, (p_j - p_i)_{j != i}, (c_j)_{j != i}]``; with
    ``num_landmark_neighbors`` / ``num_agent_neighbors`` only that many nearest landmarks / other
    agents (closest first, their messages aligned with them), zero-padded to that many slots.
    Reward of agent i: ``(1 - r) * G + r * C_i`` with ``G = -sum_k min_j |p_j - l_k|`` and
    ``C_i = -#{j != i : |p_i - p_j| < s_i + s_j}`` (``r = local_ratio``). With
    ``terminate_on_success`` a copy ends once every landmark has an agent within 0.1.
    """

    CAPTURE_RADIUS = 0.1

    def __init__(
        self,
        N: int = 3,
        local_ratio: float = 0.5,
        max_cycles: int = 25,
        terminate_on_success: bool = False,
        num_agent_neighbors: int | None = None,
        num_landmark_neighbors: int | None = None,
    ) -> None:
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError("local_ratio is a proportion: it must be between 0 and 1")
        self.name = "simple_spread"
        self.agents = tuple(f"agent_{i}" for i in range(N))
        self.n_landmarks = N
        self.dim_c = 2
        self.movable = (True,) * N
        self.silent = (True,) * N
        self.size = (0.15,) * N
        self.collide = (True,) * N
        self.local_ratio = local_ratio
        self.max_cycles = max_cycles
        self.terminate_on_success = terminate_on_success
        for k in (num_agent_neighbors, num_landmark_neighbors):
            if k is not None and (not isinstance(k, int) or k <= 0):
                raise ValueError(
                    "num_agent_neighbors / num_landmark_neighbors must be positive integers or None"
                )
        self.num_agent_neighbors = num_agent_neighbors
        self.num_landmark_neighbors = num_landmark_neighbors
        others = [[j for j in range(N) if j != i] for i in range(N)]
        self._others = torch.tensor(others, dtype=torch.int64).view(N, max(N - 1, 0))

    def observe(self, w: World) -> list[torch.Tensor]:
        a = w.pos.shape[1]
        rows = torch.arange(a)[:, None]
        to_landmarks = w.landmarks[:, None] - w.pos[:, :, None]  # [N, A, L, 2]
        to_others = (w.pos[:, None] - w.pos[:, :, None])[:, rows, self._others]  # [N, A, A-1, 2]
        comm = w.comm[:, self._others]  # [N, A, A-1, C]
        if self.num_landmark_neighbors is not None:
            (to_landmarks,) = nearest(to_landmarks, [to_landmarks], self.num_landmark_neighbors)
        if self.num_agent_neighbors is not None:
            to_others, comm = nearest(to_others, [to_others, comm], self.num_agent_neighbors)
        parts = [w.vel, w.pos, to_landmarks.flatten(2), to_others.flatten(2), comm.flatten(2)]
        return list(torch.cat(parts, dim=2).unbind(1))

    def _landmark_gaps(self, w: World) -> torch.Tensor:
        """``[N, L]``: each landmark's distance to its closest agent."""
        dist = torch.linalg.vector_norm(w.landmarks[:, :, None] - w.pos[:, None], dim=-1)
        return dist.min(dim=2).values

    def rewards(self, w: World) -> torch.Tensor:
        lay = self.layout
        shared = -self._landmark_gaps(w).sum(dim=1, keepdim=True)  # [N, 1]
        touching = (pair_distances(w) < lay.touch) & ~lay.eye
        local = -touching.to(DTYPE).sum(dim=2)  # [N, A]
        return shared * (1 - self.local_ratio) + local * self.local_ratio

    def terminal(self, w: World) -> torch.Tensor | None:
        if not self.terminate_on_success:
            return None
        return (self._landmark_gaps(w) < self.CAPTURE_RADIUS).all(dim=1)


class SimpleSpeakerListener(Scenario):
    """A speaker that cannot move tells a listener which of 3 landmarks to reach (mpe2
    ``simple_speaker_listener_v4``).

    Observations: the speaker sees its goal landmark's colour; the listener sees
    ``[v_l, (l_k - p_l)_k, c_speaker]``. Both agents get ``-|p_l - l_goal|^2`` (no local term).
    """

    COLOURS = ((0.65, 0.15, 0.15), (0.15, 0.65, 0.15), (0.15, 0.15, 0.65))

    def __init__(self, max_cycles: int = 25) -> None:
        self.name = "simple_speaker_listener"
        self.agents = ("speaker_0", "listener_0")
        self.n_landmarks = 3
        self.dim_c = 3
        self.movable = (False, True)
        self.silent = (False, True)
        self.size = (0.075, 0.075)
        self.collide = (False, False)
        self.max_cycles = max_cycles
        self._colours = torch.tensor(self.COLOURS, dtype=DTYPE)

    def goals(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return torch.randint(self.n_landmarks, (n, 1), generator=gen)

    def observe(self, w: World) -> list[torch.Tensor]:
        speaker = self._colours[w.goals[:, 0]]
        listener = torch.cat([w.vel[:, 1], landmark_offsets(w, 1), w.comm[:, 0]], dim=1)
        return [speaker, listener]

    def rewards(self, w: World) -> torch.Tensor:
        goal = w.landmarks[torch.arange(w.pos.shape[0]), w.goals[:, 0]]
        r = -((w.pos[:, 1] - goal) ** 2).sum(dim=1, keepdim=True)
        return r.expand(-1, 2)


class SimpleReference(Scenario):
    """Two agents, each guiding the other to a landmark only it knows (mpe2 ``simple_reference_v3``).

    Agent i's goal ``g_i`` is the landmark the OTHER agent should reach. Observation of agent i:
    ``[v_i, (l_k - p_i)_k, colour(g_i), c_other]``. Reward of agent i: ``(1 - r) * (R_0 + R_1) / 2
    + r * R_i`` with ``R_i = -|p_other - l_{g_i}|`` (``r = local_ratio``). An action is
    ``move + 5 * message`` over 5 moves and 10 messages.
    """

    COLOURS = ((0.75, 0.25, 0.25), (0.25, 0.75, 0.25), (0.25, 0.25, 0.75))

    def __init__(self, local_ratio: float = 0.5, max_cycles: int = 25) -> None:
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError("local_ratio is a proportion: it must be between 0 and 1")
        self.name = "simple_reference"
        self.agents = ("agent_0", "agent_1")
        self.n_landmarks = 3
        self.dim_c = 10
        self.movable = (True, True)
        self.silent = (False, False)
        self.size = (0.05, 0.05)
        self.collide = (False, False)
        self.local_ratio = local_ratio
        self.max_cycles = max_cycles
        self._colours = torch.tensor(self.COLOURS, dtype=DTYPE)

    def goals(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return torch.randint(self.n_landmarks, (n, 2), generator=gen)

    def observe(self, w: World) -> list[torch.Tensor]:
        out = []
        for i, other in ((0, 1), (1, 0)):
            colour = self._colours[w.goals[:, i]]
            out.append(torch.cat([w.vel[:, i], landmark_offsets(w, i), colour, w.comm[:, other]], dim=1))
        return out

    def rewards(self, w: World) -> torch.Tensor:
        rows = torch.arange(w.pos.shape[0])[:, None]
        goal = w.landmarks[rows, w.goals]  # [N, 2, 2]: agent i's goal landmark
        own = -torch.linalg.vector_norm(w.pos.flip(1) - goal, dim=-1)  # [N, 2]: the other agent's gap
        shared = own.mean(dim=1, keepdim=True)
        return shared * (1 - self.local_ratio) + own * self.local_ratio


def simple_spread(
    N: int = 3,
    local_ratio: float = 0.5,
    max_cycles: int = 25,
    continuous_actions: bool = False,
    terminate_on_success: bool = False,
    num_agent_neighbors: int | None = None,
    num_landmark_neighbors: int | None = None,
) -> SimpleSpread:
    """The simple_spread scenario from mpe2's keyword arguments (discrete actions only)."""
    _discrete_only(continuous_actions)
    return SimpleSpread(
        N, local_ratio, max_cycles, terminate_on_success, num_agent_neighbors, num_landmark_neighbors
    )


def simple_speaker_listener(max_cycles: int = 25, continuous_actions: bool = False) -> SimpleSpeakerListener:
    """The simple_speaker_listener scenario from mpe2's keyword arguments (discrete actions only)."""
    _discrete_only(continuous_actions)
    return SimpleSpeakerListener(max_cycles)


def simple_reference(
    local_ratio: float = 0.5, max_cycles: int = 25, continuous_actions: bool = False
) -> SimpleReference:
    """The simple_reference scenario from mpe2's keyword arguments (discrete actions only)."""
    _discrete_only(continuous_actions)
    return SimpleReference(local_ratio, max_cycles)


def _discrete_only(continuous_actions: bool) -> None:
    if continuous_actions:
        raise ValueError("the batched MPE has discrete actions only; use the mpe2 env for continuous ones")
