"""The whole team as one torch computation graph: agent neurons passing messages along a topology.

For each node v, layer by layer (``topology.py`` says which nodes and edges exist)::

    m_v  = MHA(q = e_v + W_s o_v,  k = v = {msg_u : u -> v})          # MAAC-style aggregation
    r_v  = MHA(q = e_v + m_v + P,  k = v = rows v reads)               # what v reads, asked by what it heard
    s_v  = Backbone(e_v + m_v + r_v) + A_v                               # shared neuron, own adapter
    out_v = W_msg s_v + W_rep [MHA(q = s_v + R, k = v = rows); sum_i alpha_i place_i]
                                              (messages: continuous; differentiable)
          | sum_j E_j[tok_j], tok_j ~ Cat(W_tok s_v)_j   (messages: discrete; sampled tokens)
    msg_v = a_v out_v + b_v msg_lane(v)       (residual messages; a_v = b_v = 1 at init)

``e_v`` is the learned node-id embedding, the only thing (with the optional low-rank adapter
``A_v``) that tells the shared neuron which agent it is. ``lane(v)`` is the predecessor at v's
position one layer down (``Topology.lane``): a node passes on what it heard, as a residual block
passes on its input, so from the start what the input agents say reaches the output agents along a
residual stream that each hidden layer adds to (without it, the composer of NeuroMAS-5 under
``observe: inputs`` had to learn the value's position from three hops of re-encoded messages, and
found few values even on training questions). It also makes deepening exact: a grown layer
starts as a pure relay, ``a_v = 0, b_v = 1`` (:mod:`.growth`), so the layer above hears the very
messages it was trained on.

A sender that reads rows also *reports* them: a few learned queries ``R`` look up its rows (what it
saw) and, with the same attention weights ``alpha``, their places (where it saw it: the content-free
question position or schema slot, :mod:`.encoders`), so a message can say "the value starts at word
7" in the coordinates a non-reading receiver's pointer matches (with it, the blind composer of
NeuroMAS-5 picked the right value on more training questions after cloning than without; ``W_rep``
starts at zero, so a new report changes nothing until trained). Hidden nodes read
no rows and send ``W_msg s_v`` only.

``o_v`` is the mean of the rows v reads, ``P`` a few learned read queries. What a node reads
(``NetConfig.observe``): with ``every``, every node, hidden ones included, reads the one shared
encoder pass of the task, each with queries conditioned on the messages it received, so each
hidden layer adds what it looks up to the residual stream; with ``all`` only agent nodes read (their
own observation), with ``inputs`` only layer 0. A node that reads nothing has ``o_v = r_v = 0``. An
acting node turns ``s_v`` into its agent's action logits: per categorical component, a linear head
on the state and on what the component looks up in the observation rows; per pointer component, a
score (query . key) for each observation row it can point at, the keys from that agent's own
encoder pass (content-free rows for a node that does not read: then only its messages say where to
point). With messages cut, nothing but what an agent's node reads reaches its action.

With ``sequential``, agents decide in team-action order (Text2SQL: the extractor, then the
composer). A later agent's state gets each earlier agent's choice (:class:`ChoiceEmbedding`: the row
it pointed at, as the later agent reads it, or a vector per categorical option) and its pointer
heads a learned bias per relation between the rows they score and the rows chosen earlier: the
value pointer can prefer the words naming a value stored in the chosen WHERE column. The joint
policy factorises as pi(a_1) pi(a_2 | a_1) ...: acting samples (or takes the argmax of) one agent
after another, cloning and the learner teacher-force the recorded actions, so the log-probability
the learner computes is the one the runner sampled with. The global
critic and the auxiliary reward head read an attention pool over every node's state (the critic's
copy detached, see ``module.compute_values``).

Discrete messages are part of the sampled joint action (so PPO/REINFORCE trains the message heads by
the policy gradient, as the paper trains its agents' text); the learner re-runs the graph with the
recorded tokens (``tokens=...``). ``message_mode`` picks how a discrete message is produced:
``sample`` (exploration), ``greedy`` (inference), ``given`` (learner), ``gumbel`` (straight-through
Gumbel-softmax, for supervised warm starts) and ``soft`` (expected token embeddings: a
deterministic function of the observation, used by the critic so its baseline does not depend on
the sampled tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from orchestrl.algorithms.neuromas.encoders import Encoded, make_encoder
from orchestrl.algorithms.neuromas.topology import Topology

MASKED_LOGIT = -1e9
READ_QUERIES = 4
OBSERVE = ("every", "all", "inputs")
_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "silu": nn.SiLU}


@dataclass(frozen=True)
class TeamSpec:
    """The env side: agents in team-action order, their observation sizes and action components."""

    agents: tuple[str, ...]
    obs_dims: dict[str, int]
    mask_dims: dict[str, int]
    """0 when the agent's observation carries no action mask."""
    nvecs: dict[str, tuple[int, ...]]

    @property
    def env_components(self) -> int:
        return sum(len(self.nvecs[a]) for a in self.agents)


@dataclass(frozen=True)
class NetConfig:
    dim: int = 64
    heads: int = 4
    hidden: tuple[int, ...] = (128,)
    """Backbone residual blocks' hidden widths (``model.hidden``)."""
    activation: str = "relu"
    messages: str = "continuous"
    message_vocab: int = 16
    message_len: int = 2
    adapter_rank: int = 0
    encoder: str = "mlp"
    text_layers: int = 2
    word_vectors: bool = False
    """Text encoder: words through frozen pretrained MiniLM piece vectors (False: learned ones)."""
    contextual: bool = False
    """Text encoder: question words as the frozen MiniLM's contextual states (needs word_vectors)."""
    observe: str = "all"
    """Which nodes read the task: ``every`` node (hidden nodes too: each reads the one shared
    encoder pass with queries conditioned on the messages it receives), ``all`` agent nodes (each
    its own observation), or only the ``inputs`` (layer 0). With ``inputs`` a later agent knows the
    task only from its messages: its state reads no rows, its categorical heads look nothing up, and
    its pointer heads score content-free rows (the encoder's ``blind`` rows: which question words
    exist, not what they say). Either way an agent's action depends on nothing but what its node
    reads, the messages it receives and (``sequential``) the choices of the agents before it."""
    sequential: bool = False
    """Agents decide in team-action order, each knowing the choices of those before it (taken from
    the recorded actions in cloning and in the learner, decided in the graph when acting): a chosen
    option's embedding is added to the later agent's state, and its pointer heads get a learned
    bias per relation between each row they score and the rows chosen before (Text2SQL: the value
    pointer can favour the words that name a value stored in the chosen WHERE column)."""
    repeats: int = 1
    """Times each node applies the shared neuron, re-reading its rows between applications: the
    compute-matched monolith applies it as many times as the network it is compared with has
    layers."""


@dataclass
class NetOut:
    env_logits: torch.Tensor
    """(B, sum of all agents' nvecs), masked, in team-action order."""
    states: torch.Tensor
    """(B, nodes, dim)."""
    token_logits: torch.Tensor | None = None
    """(B, senders * message_len * vocab), discrete messages only."""
    tokens: torch.Tensor | None = None
    """(B, senders * message_len) the tokens the graph ran with."""
    encoded: dict[str, Encoded] = field(default_factory=dict)
    actions: torch.Tensor | None = None
    """(B, env components) the env actions the graph decided with (``sequential`` only)."""


class Backbone(nn.Module):
    """The shared neuron: residual MLP blocks + a per-node low-rank adapter (optional)."""

    def __init__(self, dim: int, hidden: tuple[int, ...], activation: str, n_nodes: int, rank: int) -> None:
        super().__init__()
        self.norm_in = nn.LayerNorm(dim)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, h), _ACTIVATIONS[activation](), nn.Linear(h, dim)) for h in hidden
        )
        self.norm_out = nn.LayerNorm(dim)
        self.rank = rank
        if rank:
            self.adapter_down = nn.Parameter(torch.randn(n_nodes, dim, rank) / dim**0.5)
            self.adapter_up = nn.Parameter(torch.zeros(n_nodes, rank, dim))

    def forward(self, x: torch.Tensor, node: int) -> torch.Tensor:
        x = self.norm_in(x)
        for block in self.blocks:
            x = x + block(x)
        if self.rank:
            x = x + (x @ self.adapter_down[node]) @ self.adapter_up[node]
        return self.norm_out(x)


class NeuromasNet(nn.Module):
    """Encoders, neurons, message passing and heads; plain torch, so it is testable without RLlib."""

    def __init__(self, spec: TeamSpec, topology: Topology, cfg: NetConfig) -> None:
        super().__init__()
        self.spec, self.topology, self.cfg = spec, topology, cfg
        d, n_nodes = cfg.dim, len(topology.nodes)
        if d % cfg.heads:
            raise ValueError(f"embed_dim {d} must be divisible by heads {cfg.heads}")
        if cfg.messages not in ("continuous", "discrete", "none"):
            raise ValueError(f"messages must be continuous, discrete or none, got {cfg.messages!r}")
        if cfg.observe not in OBSERVE:
            raise ValueError(f"observe must be one of {OBSERVE}, got {cfg.observe!r}")
        if cfg.repeats < 1:
            raise ValueError(f"repeats must be at least 1, got {cfg.repeats}")
        # One encoder per distinct observation size (agents with the same layout share it).
        self.encoder_of = {a: f"obs{spec.obs_dims[a]}" for a in spec.agents}
        self.encoders = nn.ModuleDict(
            {
                key: make_encoder(
                    cfg.encoder,
                    spec.obs_dims[a],
                    d,
                    cfg.heads,
                    cfg.text_layers,
                    cfg.word_vectors,
                    cfg.contextual,
                )
                for a, key in self.encoder_of.items()
            }
        )
        self.node_embedding = nn.Embedding(n_nodes, d)
        nn.init.normal_(self.node_embedding.weight, std=0.5)
        self.summary = nn.Linear(d, d)
        # Modules with no input are not built: no aggregation without edges, no message weights
        # without a node whose message someone reads (the monolith has neither).
        self.aggregate = nn.MultiheadAttention(d, cfg.heads, batch_first=True) if topology.edges else None
        self.read_queries = nn.Parameter(torch.randn(READ_QUERIES, d) * 0.1)
        self.read = nn.MultiheadAttention(d, cfg.heads, batch_first=True)
        self.read_out = nn.Linear(READ_QUERIES * d, d)
        self.backbone = Backbone(d, cfg.hidden, cfg.activation, n_nodes, cfg.adapter_rank)

        self.senders = topology.senders() if cfg.messages != "none" else ()
        self.sender_slot = {node: i for i, node in enumerate(self.senders)}
        self.lanes = {v: lane for v in self.senders if (lane := topology.lane(v)) in self.sender_slot}
        if self.lanes:  # per node (a_v, b_v): its own message and its lane's, in what it sends on
            self.message_mix = nn.Parameter(torch.tensor([[1.0, 1.0]]).repeat(n_nodes, 1))
        if self.senders and cfg.messages == "continuous":
            self.message = nn.Linear(d, d)
            # What a reading sender reports of its rows directly, not only through its state.
            self.report_queries = nn.Parameter(torch.randn(READ_QUERIES, d) * 0.1)
            self.report = nn.MultiheadAttention(d, cfg.heads, batch_first=True)
            self.report_out = nn.Linear(2 * READ_QUERIES * d, d)
            nn.init.zeros_(self.report_out.weight)
            nn.init.zeros_(self.report_out.bias)
        elif self.senders and cfg.messages == "discrete":
            self.token_head = nn.Linear(d, cfg.message_len * cfg.message_vocab)
            nn.init.orthogonal_(self.token_head.weight, gain=0.01)
            nn.init.zeros_(self.token_head.bias)
            self.token_embedding = nn.Parameter(torch.randn(cfg.message_len, cfg.message_vocab, d) * 0.5)

        self.heads = nn.ModuleDict({a: self._agent_heads(a) for a in spec.agents})
        if cfg.sequential:  # what a later agent knows of each earlier agent's choice
            self.choices = nn.ModuleDict({a: ChoiceEmbedding(d, self._pointers(a)) for a in spec.agents[:-1]})
        self.pool_query = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pool = nn.MultiheadAttention(d, cfg.heads, batch_first=True)

    # -- heads --------------------------------------------------------------------------------------
    def _pointers(self, agent: str) -> list[tuple[int, slice | None]]:
        """(options, rows pointed at or None) per action component of ``agent``."""
        encoder = self.encoders[self.encoder_of[agent]]
        nvec = self.spec.nvecs[agent]
        return list(zip(nvec, encoder.pointer_rows(agent, len(nvec)), strict=True))

    def _earlier_pointers(self, agent: str) -> int:
        """Pointer components of the agents that decide before ``agent`` (``sequential`` only)."""
        if not self.cfg.sequential:
            return 0
        earlier = self.spec.agents[: self.spec.agents.index(agent)]
        return sum(rows is not None for a in earlier for _, rows in self._pointers(a))

    def _agent_heads(self, agent: str) -> nn.ModuleList:
        d = self.cfg.dim
        kinds = self.encoders[self.encoder_of[agent]].relation_kinds
        earlier = self._earlier_pointers(agent) if kinds else 0
        heads = []
        for n, pointer in self._pointers(agent):
            if pointer is None:
                head = AttentiveHead(d, n)
            else:
                if pointer.stop - pointer.start != n:
                    raise ValueError(f"{agent}: a pointer over {pointer} cannot choose among {n} options")
                head = PointerHead(d, pointer, earlier, kinds)
            heads.append(head)
        return nn.ModuleList(heads)

    def _agent_logits(
        self, agent: str, state: torch.Tensor, enc: Encoded, reads: bool, chosen: list[torch.Tensor]
    ) -> torch.Tensor:
        return torch.cat([head(state, enc, reads, chosen) for head in self.heads[agent]], -1)

    def _reads(self, v: int) -> bool:
        """Whether node ``v`` reads the task (see ``NetConfig.observe``)."""
        node = self.topology.nodes[v]
        if self.cfg.observe == "every":
            return True
        return bool(node.agents) and (self.cfg.observe == "all" or node.layer == 0)

    def _rows(self, v: int, encoded: dict[str, Encoded]) -> Encoded | None:
        """What node ``v`` reads: its agents' rows; a hidden node, the shared encoder pass (every
        distinct encoding once); None for a node that does not read."""
        if not self._reads(v):
            return None
        agents = self.topology.nodes[v].agents or self.spec.agents
        distinct = list({id(encoded[a]): encoded[a] for a in agents}.values())
        return _concat(distinct)

    # -- the graph ----------------------------------------------------------------------------------
    def forward(
        self,
        obs: dict[str, torch.Tensor],
        masks: dict[str, torch.Tensor] | None = None,
        *,
        message_mode: str = "greedy",
        tokens: torch.Tensor | None = None,
        token_dropout: float = 0.0,
        gumbel_tau: float = 1.0,
        actions: torch.Tensor | None = None,
        action_mode: str = "greedy",
    ) -> NetOut:
        """Runs every node in topological order.

        ``obs``: agent -> (B, obs_dim) flat observations; ``masks``: agent -> (B, sum(nvec)) 0/1.
        ``tokens``: (B, senders * message_len) recorded message tokens, for ``message_mode="given"``.
        ``actions``: (B, env components) the recorded env actions a ``sequential`` team's later
        agents condition on (teacher forcing); without them each agent's action is decided in the
        graph, ``action_mode`` ``greedy`` or ``sample``, before the next agent's logits.
        """
        topo = self.topology
        encoded = self._encode(obs, token_dropout)
        batch = next(iter(obs.values())).shape[0]
        states: dict[int, torch.Tensor] = {}
        messages: dict[int, torch.Tensor] = {}
        token_logits: list[torch.Tensor] = []
        used_tokens: list[torch.Tensor] = []
        for layer in topo.layers:
            for v in layer:
                e_v = self.node_embedding.weight[v].expand(batch, -1)
                rows = self._rows(v, encoded)
                own = self.summary(_masked_mean(rows)) if rows is not None else torch.zeros_like(e_v)
                m_v = self._aggregate(v, e_v + own, messages)
                r_v = self._read(e_v + m_v, rows) if rows is not None else torch.zeros_like(e_v)
                states[v] = self.backbone(e_v + m_v + r_v, v)
                for _ in range(self.cfg.repeats - 1):  # the compute-matched monolith
                    r_v = self._read(states[v], rows) if rows is not None else torch.zeros_like(e_v)
                    states[v] = self.backbone(states[v] + r_v, v)
                if v in self.sender_slot:
                    msg, logits, toks = self._emit(states[v], v, message_mode, tokens, gumbel_tau, rows)
                    if v in self.lanes:
                        a_v, b_v = self.message_mix[v]
                        msg = a_v * msg + b_v * messages[self.lanes[v]]
                    messages[v] = msg
                    if logits is not None:
                        token_logits.append(logits)
                        used_tokens.append(toks)
        env_logits, decided = self._act(states, encoded, masks, actions, action_mode)
        return NetOut(
            env_logits=env_logits,
            states=torch.stack([states[v] for v in range(len(topo.nodes))], 1),
            token_logits=torch.cat(token_logits, -1) if token_logits else None,
            tokens=torch.cat(used_tokens, -1) if used_tokens else None,
            encoded=encoded,
            actions=decided,
        )

    def _act(
        self,
        states: dict[int, torch.Tensor],
        encoded: dict[str, Encoded],
        masks: dict[str, torch.Tensor] | None,
        actions: torch.Tensor | None,
        mode: str,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Every agent's masked logits, in team-action order; with ``sequential``, also the actions
        the later agents conditioned on (the recorded ones, or decided here one agent at a time)."""
        logits_of: list[torch.Tensor] = []
        taken: list[torch.Tensor] = []
        start = 0
        for i, agent in enumerate(self.spec.agents):
            v = self.topology.acting_node(agent)
            state, enc, chosen = states[v], encoded[agent], []
            for earlier, acts in zip(self.spec.agents[:i], taken, strict=False):  # sequential only
                state = state + self.choices[earlier](acts, enc, chosen)
            logits = self._agent_logits(agent, state, enc, self._reads(v), chosen)
            if masks is not None and agent in masks:
                logits = logits.masked_fill(masks[agent] < 0.5, MASKED_LOGIT)
            logits_of.append(logits)
            if self.cfg.sequential:
                n = len(self.spec.nvecs[agent])
                if actions is not None:
                    taken.append(actions[:, start : start + n].long())
                else:
                    taken.append(_decide(logits, self.spec.nvecs[agent], mode))
                start += n
        return torch.cat(logits_of, -1), torch.cat(taken, -1) if taken else None

    def _encode(self, obs: dict[str, torch.Tensor], token_dropout: float) -> dict[str, Encoded]:
        """Each agent's rows from its own observation: encoded if its node reads it, else blind (see
        ``NetConfig.observe``). Agents that read the very same observation (Text2SQL's two agents
        do) share one encoder pass, which halves the cost and changes nothing else."""
        encoded: dict[str, Encoded] = {}
        for a in self.spec.agents:
            key = self.encoder_of[a]
            if not self._reads(self.topology.acting_node(a)):
                encoded[a] = self.encoders[key].blind(obs[a])
                continue
            twin = next(
                (
                    b
                    for b in encoded
                    if self.encoder_of[b] == key
                    and self._reads(self.topology.acting_node(b))
                    and torch.equal(obs[a], obs[b])
                ),
                None,
            )
            if twin is not None:
                encoded[a] = encoded[twin]
            else:
                encoded[a] = self.encoders[key](obs[a], token_dropout=token_dropout)
        return encoded

    def _aggregate(self, v: int, query: torch.Tensor, messages: dict[int, torch.Tensor]) -> torch.Tensor:
        sources = [u for u in self.topology.predecessors(v) if u in messages]
        if not sources:
            return torch.zeros_like(query)
        keys = torch.stack([messages[u] for u in sources], 1)
        out, _ = self.aggregate(query[:, None], keys, keys, need_weights=False)
        return out[:, 0]

    def _read(self, query: torch.Tensor, rows: Encoded) -> torch.Tensor:
        queries = query[:, None, :] + self.read_queries[None]
        out, _ = self.read(queries, rows.tokens, rows.tokens, key_padding_mask=rows.pad, need_weights=False)
        return self.read_out(out.flatten(1))

    def _emit(
        self,
        state: torch.Tensor,
        v: int,
        mode: str,
        given: torch.Tensor | None,
        tau: float,
        rows: Encoded | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        cfg = self.cfg
        if cfg.messages == "continuous":
            msg = self.message(state)
            if rows is not None:  # a reading sender also reports what it looked up, and where
                queries = state[:, None, :] + self.report_queries[None]
                out, weights = self.report(queries, rows.tokens, rows.tokens, key_padding_mask=rows.pad)
                places = rows.places if rows.places is not None else torch.zeros_like(rows.tokens)
                pointed = torch.einsum("bkt,btd->bkd", weights, places)
                msg = msg + self.report_out(torch.cat([out.flatten(1), pointed.flatten(1)], -1))
            return msg, None, None
        logits = self.token_head(state)  # (B, L * K)
        per_token = logits.view(-1, cfg.message_len, cfg.message_vocab)
        if mode == "soft":
            weights = per_token.softmax(-1)
        elif mode == "gumbel":
            weights = F.gumbel_softmax(per_token, tau=tau, hard=True)
        else:
            if mode == "sample":
                toks = torch.distributions.Categorical(logits=per_token).sample()
            elif mode == "greedy":
                toks = per_token.argmax(-1)
            elif mode == "given":
                if given is None:
                    raise ValueError("message_mode='given' needs the recorded tokens")
                slot = self.sender_slot[v]
                toks = given[:, slot * cfg.message_len : (slot + 1) * cfg.message_len].long()
            else:
                raise ValueError(f"unknown message_mode {mode!r}")
            weights = F.one_hot(toks, cfg.message_vocab).float()
        msg = torch.einsum("blk,lkd->bd", weights, self.token_embedding)
        return msg, logits, weights.argmax(-1)

    # -- critic side ---------------------------------------------------------------------------------
    def pooled(self, states: torch.Tensor) -> torch.Tensor:
        """An attention pool over all nodes' states: what the critic and the auxiliary head read."""
        query = self.pool_query.expand(states.shape[0], -1, -1)
        out, _ = self.pool(query, states, states, need_weights=False)
        return out[:, 0]


class AttentiveHead(nn.Module):
    """A categorical component: the node state plus what it looks up in the observation rows for
    this component (one attention read per component: "average", "at least", "smallest"...)."""

    def __init__(self, dim: int, n: int) -> None:
        super().__init__()
        self.query = nn.Linear(dim, dim)
        self.scale = dim**-0.5
        self.out = nn.Linear(2 * dim, n)
        nn.init.orthogonal_(self.out.weight, gain=0.01)
        nn.init.zeros_(self.out.bias)

    def forward(
        self, state: torch.Tensor, enc: Encoded, reads: bool = True, chosen: list[torch.Tensor] = ()
    ) -> torch.Tensor:
        if not reads:  # a node that knows the task only from its messages looks nothing up
            return self.out(torch.cat([state, torch.zeros_like(state)], -1))
        scores = torch.einsum("bd,btd->bt", self.query(state), enc.tokens) * self.scale
        weights = scores.masked_fill(enc.pad, MASKED_LOGIT).softmax(-1)
        looked_up = torch.einsum("bt,btd->bd", weights, enc.tokens)
        return self.out(torch.cat([state, looked_up], -1))


class PointerHead(nn.Module):
    """logit_i = (W_q s) . (W_k row_i) / sqrt(d) + b . row_i + sum_k w_k[rel(c_k, row_i)], over a range
    of observation rows; ``c_k`` is the row an earlier agent chose with its k-th pointer component
    and ``rel`` the encoder's relation between two rows (``sequential`` teams whose encoder has
    relations; ``w`` starts at zero)."""

    def __init__(self, dim: int, rows: slice, earlier: int = 0, relation_kinds: int = 0) -> None:
        super().__init__()
        self.rows = rows
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.bias = nn.Linear(dim, 1)
        self.scale = dim**-0.5
        self.relation_bias = nn.Parameter(torch.zeros(earlier, relation_kinds)) if earlier else None

    def forward(
        self, state: torch.Tensor, enc: Encoded, reads: bool = True, chosen: list[torch.Tensor] = ()
    ) -> torch.Tensor:
        rows = enc.tokens[:, self.rows]  # its choices: scored whether or not the node reads the task
        logits = torch.einsum("bd,brd->br", self.query(state), self.key(rows)) * self.scale
        logits = logits + self.bias(rows)[..., 0]
        if self.relation_bias is not None and enc.relations is not None:
            batch = torch.arange(rows.shape[0], device=rows.device)
            for weights, row in zip(self.relation_bias, chosen, strict=True):
                logits = logits + weights[enc.relations[batch, row][:, self.rows]]
        return logits


class ChoiceEmbedding(nn.Module):
    """What a later agent of a ``sequential`` team knows of an earlier agent's action: per
    component, the encoding of the row it pointed at (as the later agent reads that row) through a
    linear map, or a learned vector per categorical option; summed. Zero at the start, so a new
    sequential team acts as the independent one until trained. Also appends each pointer choice's
    row index (into the encoded rows) to ``chosen``, for the later agent's pointer heads."""

    def __init__(self, dim: int, components: list[tuple[int, slice | None]]) -> None:
        super().__init__()
        self.components = components
        parts: list[nn.Module] = []
        for n, rows in components:
            part = nn.Linear(dim, dim, bias=False) if rows is not None else nn.Embedding(n, dim)
            nn.init.zeros_(part.weight)
            parts.append(part)
        self.parts = nn.ModuleList(parts)

    def forward(self, actions: torch.Tensor, enc: Encoded, chosen: list[torch.Tensor]) -> torch.Tensor:
        batch = torch.arange(actions.shape[0], device=actions.device)
        total = torch.zeros(actions.shape[0], enc.tokens.shape[-1], device=actions.device)
        for c, ((_, rows), part) in enumerate(zip(self.components, self.parts, strict=True)):
            if rows is None:
                total = total + part(actions[:, c])
            else:
                row = rows.start + actions[:, c]
                chosen.append(row)
                total = total + part(enc.tokens[batch, row])
        return total


def _decide(logits: torch.Tensor, nvec: tuple[int, ...], mode: str) -> torch.Tensor:
    """(B, sum nvec) masked logits -> (B, len nvec) one option per component."""
    parts = torch.split(logits, list(nvec), -1)
    if mode == "sample":
        return torch.stack([torch.distributions.Categorical(logits=p).sample() for p in parts], -1)
    if mode == "greedy":
        return torch.stack([p.argmax(-1) for p in parts], -1)
    raise ValueError(f"action_mode must be greedy or sample, got {mode!r}")


def _concat(parts: list[Encoded]) -> Encoded:
    if len(parts) == 1:
        return parts[0]
    places = None
    if all(p.places is not None for p in parts):
        places = torch.cat([p.places for p in parts], 1)
    return Encoded(torch.cat([p.tokens for p in parts], 1), torch.cat([p.pad for p in parts], 1), places)


def _masked_mean(enc: Encoded) -> torch.Tensor:
    keep = (~enc.pad).float()[..., None]
    return (enc.tokens * keep).sum(1) / keep.sum(1).clamp(min=1.0)


def parameter_count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
