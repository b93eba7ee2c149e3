"""NeuroMAS' knobs and how they shape an RLlib ``PPOConfig``.

``configure_neuromas`` swaps the env for the one-agent team env (:mod:`.team_env`), maps that agent
to the team graph (:mod:`.module`), installs the joint-loss learner (:mod:`.learner`) and a warm
start that, once the algorithm is built, grows the graph from a smaller trained one and/or clones
the env's expert (the experiment's ``warm_start:`` section; the loss is in :mod:`.cloning`), then
pushes the weights to every env runner and checks they arrived.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.policy.policy import PolicySpec

from orchestrl.algorithms.behaviour_cloning import (
    collect_demonstrations,
    require_expert,
    with_warm_start,
)
from orchestrl.algorithms.context import WarmStartSection
from orchestrl.algorithms.modules import AgentToModule
from orchestrl.algorithms.neuromas.learner import KNOBS_KEY, NeuromasLearner
from orchestrl.algorithms.neuromas.module import NeuromasModule, build_topology
from orchestrl.algorithms.neuromas.team_env import (
    GROUP_SIZE_KEY,
    MESSAGE_SLOTS_KEY,
    MESSAGE_VOCAB_KEY,
    TEAM,
    NeuromasTeamEnv,
    agent_nvec,
    team_spaces,
    ungrouped,
)
from orchestrl.errors import ConfigError

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.learner.learner import Learner

    from orchestrl.algorithms.context import BuildContext

log = logging.getLogger(__name__)


class NeuromasConfig(BaseModel):
    """``algorithm:`` keys for neuromas."""

    model_config = ConfigDict(extra="forbid")

    # -- topology ----------------------------------------------------------------------------------
    layers: list[int] = Field(default_factory=lambda: [2, 2])
    """Hidden layers' widths: [1, 1] = NeuroMAS-3, [2, 2] = -5, [2, 2, 2] = -7 (plus the output node)."""
    input_agents: list[str] | None = None
    """Env agents in the input layer (they read and act first); the others form the output layer.
    None: the first agent in sorted order (text2sql: schema_extractor)."""
    monolithic: bool = False
    """One node that reads every observation and acts for every agent (the single-agent baseline)."""
    observe: Literal["every", "all", "inputs"] = "all"
    """every: every node reads the task, hidden nodes too (one shared encoder pass, read with queries
    conditioned on the messages each node receives); all: every agent node reads its own
    observation (messages add what it cannot see or infer); inputs: only the input agents do, later
    agents learn the task from messages alone (the strict feed-forward reading: an output neuron
    sees only the layer below)."""
    sequential: bool = False
    """Agents decide in order, each conditioned on the earlier agents' actions (teacher-forced in
    cloning and in the learner, sampled when acting); see ``network.NetConfig.sequential``."""
    repeats: int = Field(1, ge=1)
    """Monolithic only: times its node applies the neuron (the compute-matched control: as many as
    the network it is compared with has layers)."""
    messages: Literal["continuous", "discrete", "none"] = "continuous"
    """continuous: differentiable vectors; discrete: sampled tokens (policy gradient); none: cut."""
    message_vocab: int = Field(16, ge=2)
    message_len: int = Field(2, ge=1)
    """Tokens per discrete message."""

    # -- neurons -----------------------------------------------------------------------------------
    embed_dim: int = Field(48, ge=8)
    """Node state, message and encoder width (the backbone's blocks use ``model.hidden``)."""
    heads: int = Field(4, ge=1)
    adapter_rank: int = Field(0, ge=0)
    """Per-node low-rank adapter on the shared neuron (0: node-id embedding only)."""
    encoder: Literal["auto", "mlp", "text2sql"] = "auto"
    """auto: the text encoder for text2sql, an MLP for flat observations."""
    text_layers: int = Field(2, ge=0)
    word_vectors: bool = False
    """Text2SQL: read every word piece through frozen all-MiniLM-L6-v2 vectors (its own WordPiece
    input embeddings), so words that never occur in training are read by their meaning (False: a
    learned embedding per piece, the no-pretraining ablation)."""
    contextual: bool = False
    """Text2SQL, with word_vectors: question words as the frozen MiniLM's contextual states (the
    word in its question), cached per question, instead of the static piece vectors."""

    # -- training ----------------------------------------------------------------------------------
    objective: Literal["ppo", "reinforce"] = "ppo"
    """reinforce: the paper's REINFORCE with the critic as baseline (forces lambda_=1, num_epochs=1 and one
    minibatch = the whole batch: on-policy)."""
    credit: Literal["shared", "counterfactual"] = "shared"
    """shared: every agent's components get the team's advantage (the paper's one reward);
    counterfactual: each env agent its own, from re-executing the episode with only its action
    swapped for ``alternatives`` draws of its own policy (one-step envs with the counterfactual API,
    e.g. text2sql; :mod:`.credit`)."""
    alternatives: int = Field(4, ge=1)
    """Re-executions per agent and episode with ``credit: counterfactual``."""
    baseline: Literal["critic", "group"] = "critic"
    """critic: the advantage is GAE's against the learned critic; group: the env poses each task
    ``group_size`` times running and each sampled answer is scored against the others of its group
    (leave-one-out, one-step envs; :mod:`.group`). Demonstrations and evaluation pose every task once."""
    group_size: int = Field(4, ge=2)
    """With ``baseline: group``: answers sampled per task. Keep each env's share of a batch
    (``train_batch_size`` / envs) a multiple of it, so every group lies whole in one batch; the answers
    of a group split across batches keep the critic's advantage."""
    anchor_coeff: float = Field(0.0, ge=0)
    """Weight of KL(pi || pi_clone), the policy cloning left, in the RL loss (0: no anchor)."""
    aux_coeff: float = Field(0.0, ge=0)
    """Weight of the auxiliary team-reward prediction loss (0: no auxiliary head)."""
    bc_token_dropout: float = Field(0.3, ge=0, lt=1)
    """Probability of dropping each known word to the "unknown" embedding during the warm start
    (the experiment's ``warm_start:`` section clones the env's expert; see :mod:`.cloning`)."""
    bc_validation_env: list[dict[str, Any]] | None = None
    """Env ``kwargs`` overrides for validation demonstrations (Text2SQL: ``{split: validation}``,
    schemas training never sees), one or a list of them (e.g. also ``{split: validation,
    questions_file: <dev questions written by hand>}``; one is read as a list of one): cloning then
    stops early, keeping the epoch whose greedy team agrees most with the expert there, on the mean
    over the sets (see :mod:`.cloning`). None: ``warm_start.epochs`` epochs."""
    bc_validation_episodes: int = Field(512, ge=1)
    bc_patience: int = Field(3, ge=1)
    """Epochs without a better validation agreement before cloning stops."""
    grow_from: str | None = None
    """A checkpoint of a trained smaller NeuroMAS (orchestrl run checkpoint or module dir)."""
    growth_noise: float = Field(0.01, ge=0)

    @field_validator("bc_validation_env", mode="before")
    @classmethod
    def _validation_sets(cls, value: Any) -> Any:
        return [value] if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _coherent(self) -> NeuromasConfig:
        if self.embed_dim % self.heads:
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by heads {self.heads}")
        if any(width < 1 for width in self.layers):
            raise ValueError(f"layers: every hidden layer needs at least one node, got {self.layers}")
        if self.monolithic and self.grow_from:
            raise ValueError("grow_from: a monolithic agent has no nodes to grow")
        if self.credit == "counterfactual" and self.messages == "discrete":
            raise ValueError(
                "credit: counterfactual credits env agents' components; discrete message tokens "
                "belong to no agent (use continuous messages)"
            )
        if self.baseline == "group" and self.credit == "counterfactual":
            raise ValueError(
                "baseline: group and credit: counterfactual each replace the shared advantage; choose one"
            )
        if self.repeats > 1 and not self.monolithic:
            raise ValueError("repeats: only a monolithic agent applies its neuron more than once")
        return self


def module_model_config(knobs: NeuromasConfig, context: BuildContext) -> dict[str, Any]:
    """What :class:`.module.NeuromasModule` is built from (checked against the env)."""
    env, model = context.env, context.model
    agents = list(env.agents)
    inputs = knobs.input_agents or agents[:1]
    unknown = [a for a in inputs if a not in agents]
    if unknown:
        raise ConfigError(f"algorithm.input_agents: {unknown} are not agents of env '{env.name}' ({agents})")
    if not knobs.monolithic and len(inputs) >= len(agents) and knobs.layers:
        raise ConfigError(
            "algorithm.input_agents: every agent is an input; no output agent reads the hidden layers"
        )
    encoder = knobs.encoder
    if encoder == "auto":
        encoder = "text2sql" if env.name == "text2sql" else "mlp"
    if encoder == "text2sql" and env.name != "text2sql":
        raise ConfigError(f"algorithm.encoder: text2sql reads the text2sql layout, not env '{env.name}'")
    if knobs.word_vectors and encoder != "text2sql":
        raise ConfigError(f"algorithm.word_vectors: only the text2sql encoder reads words, not '{encoder}'")
    if knobs.contextual and not knobs.word_vectors:
        raise ConfigError(
            "algorithm.contextual: contextual token states come from the pretrained model: set word_vectors"
        )
    if encoder == "text2sql" and env.agent_id_in_obs:
        raise ConfigError(
            "env.agent_id_in_obs: the text2sql encoder reads the raw layout; node embeddings say who is who"
        )
    try:
        nvecs = {a: list(agent_nvec(env.action_spaces[a], a)) for a in agents}
    except ValueError as err:
        raise ConfigError(f"env.name: {err}") from None
    return {
        "agents": agents,
        "nvecs": nvecs,
        "input_agents": list(inputs),
        "layers": list(knobs.layers),
        "monolithic": knobs.monolithic,
        "messages": knobs.messages,
        "message_vocab": knobs.message_vocab,
        "message_len": knobs.message_len,
        "embed_dim": knobs.embed_dim,
        "heads": knobs.heads,
        "hidden": list(model.hidden),
        "critic_hidden": list(model.critic_hidden) if model.critic_hidden else None,
        "activation": model.activation,
        "adapter_rank": knobs.adapter_rank,
        "encoder": encoder,
        "text_layers": knobs.text_layers,
        "word_vectors": knobs.word_vectors,
        "contextual": knobs.contextual,
        "observe": knobs.observe,
        "sequential": knobs.sequential,
        "repeats": knobs.repeats,
        "aux_head": knobs.aux_coeff > 0,
    }


def message_slots(model_config: dict[str, Any]) -> int:
    """Discrete message tokens in the team action (senders x tokens per message)."""
    if model_config["messages"] != "discrete" or model_config["monolithic"]:
        return 0
    topology = build_topology(model_config, list(model_config["agents"]))
    return len(topology.senders()) * int(model_config["message_len"])


def with_validation_files_resolved(knobs: NeuromasConfig) -> NeuromasConfig:
    """``knobs`` with each validation set's ``questions_file`` an absolute path, resolved where the
    config is built (a worker may run in another directory); refuses, naming the key, one that is
    not a file."""
    if not knobs.bc_validation_env:
        return knobs
    resolved = []
    for i, override in enumerate(knobs.bc_validation_env):
        path = override.get("questions_file")
        if path is not None:
            file = Path(path).expanduser().resolve()
            if not file.is_file():
                raise ConfigError(f"algorithm.bc_validation_env[{i}].questions_file: {path} is not a file")
            override = {**override, "questions_file": str(file)}
        resolved.append(override)
    return knobs.model_copy(update={"bc_validation_env": resolved})


def configure_neuromas(ppo: PPOConfig, knobs: NeuromasConfig, context: BuildContext) -> PPOConfig:
    knobs = with_validation_files_resolved(knobs)
    model_config = module_model_config(knobs, context)
    if knobs.grow_from and not Path(knobs.grow_from).expanduser().exists():
        raise ConfigError(f"algorithm.grow_from: {knobs.grow_from} does not exist")
    slots = message_slots(model_config)
    env = context.env
    extra_env = {MESSAGE_SLOTS_KEY: slots, MESSAGE_VOCAB_KEY: knobs.message_vocab}
    if ppo.evaluation_config is not None:  # every evaluation task once, whatever training does
        evaluated = ppo.evaluation_config.get("env_config", ppo.env_config)
        ppo.evaluation_config["env_config"] = ungrouped({**evaluated, **extra_env})
    if knobs.baseline == "group":
        if env.horizon != 1:
            raise ConfigError(
                f"algorithm.baseline: the group baseline scores one-step episodes; env '{env.name}' "
                f"has horizon {env.horizon}"
            )
        extra_env[GROUP_SIZE_KEY] = knobs.group_size
    ppo = ppo.environment(env=NeuromasTeamEnv, env_config={**ppo.env_config, **extra_env})
    obs_space, act_space = team_spaces(env.observation_spaces, env.action_spaces, slots, knobs.message_vocab)
    ppo = ppo.multi_agent(
        policies={TEAM: PolicySpec(observation_space=obs_space, action_space=act_space)},
        policy_mapping_fn=AgentToModule({TEAM: TEAM}),
    ).rl_module(rl_module_spec=RLModuleSpec(module_class=NeuromasModule, model_config=model_config))
    if knobs.objective == "reinforce":
        # On-policy: one gradient step on the whole batch (REINFORCE has no ratio to correct a second
        # step on samples the first made stale). minibatch_size None makes the learner take the batch
        # as one minibatch whatever its length; a size equal to train_batch_size would still split it,
        # since the learner's batch also holds one bootstrap row per episode.
        if ppo.num_epochs != 1 or ppo.lambda_ != 1.0:
            log.warning(
                "objective=reinforce: one on-policy step per batch (num_epochs=1, one minibatch), lambda_=1"
            )
        ppo = ppo.training(num_epochs=1, lambda_=1.0, minibatch_size=None)
    seed = int(ppo.seed or 0)
    learner_knobs = {**knobs.model_dump(), "seed": seed, "gamma": ppo.gamma}
    ppo = ppo.learners(learner_class=NeuromasLearner, learner_config_dict={KNOBS_KEY: learner_knobs})
    if knobs.credit == "counterfactual":
        ppo = with_team_credit(ppo, knobs, model_config, env)
    if knobs.baseline == "group":
        from orchestrl.algorithms.neuromas.group import GroupAdvantageColumns

        ppo = ppo.learners(learner_connector=GroupAdvantageColumns(knobs.group_size))
    if context.warm_start.episodes:
        require_expert(env.name)
    if context.warm_start.dagger_rounds:
        raise ConfigError(
            "warm_start.dagger_rounds: neuromas clones its team graph with its own loss, not DAgger"
        )
    if not (context.warm_start.episodes or knobs.grow_from):
        return ppo
    hook = TeamWarmStart(knobs, context.warm_start, ungrouped(ppo.env_config), seed=seed, gamma=ppo.gamma)
    return with_warm_start(ppo, hook)


def with_team_credit(
    ppo: PPOConfig, knobs: NeuromasConfig, model_config: dict[str, Any], env: Any
) -> PPOConfig:
    """The runner callbacks and learner connector of per-agent counterfactual credit (:mod:`.credit`);
    refuses, naming the key, an env it cannot re-execute."""
    from orchestrl.algorithms.callbacks import with_callbacks
    from orchestrl.algorithms.neuromas.credit import (
        TeamCreditCallbacks,
        TeamCreditColumns,
        TeamCreditSettings,
    )
    from orchestrl.envs.counterfactual import supports_counterfactual
    from orchestrl.envs.registry import get_env

    if not supports_counterfactual(get_env(env.name).load()):
        raise ConfigError(
            f"algorithm.credit: env '{env.name}' cannot re-execute an episode (no counterfactual API)"
        )
    if env.horizon != 1:
        raise ConfigError(
            f"algorithm.credit: counterfactual credit re-executes one-step episodes; env '{env.name}' "
            f"has horizon {env.horizon}"
        )
    agents = model_config["agents"]
    settings = TeamCreditSettings(
        tuple(agents), tuple(tuple(model_config["nvecs"][a]) for a in agents), knobs.alternatives
    )
    ppo = ppo.learners(learner_connector=TeamCreditColumns(agents))
    return with_callbacks(ppo, TeamCreditCallbacks.with_settings(settings))


# -- warm start: growth, then behaviour cloning --------------------------------------------------------
class TeamWarmStart:
    """Grows and/or behaviour-clones the team module of one learner, in place (picklable, so it also
    runs on remote learners)."""

    def __init__(
        self,
        knobs: NeuromasConfig,
        settings: WarmStartSection,
        env_config: dict[str, Any],
        *,
        seed: int,
        gamma: float,
    ) -> None:
        self.knobs = knobs
        self.settings = settings
        self.env_config = dict(env_config)
        self.seed = seed
        self.gamma = gamma

    def __call__(self, learner: Learner, **kwargs: Any) -> dict[str, Any]:
        return self.apply(learner.module[TEAM].unwrapped())

    def apply(self, module: NeuromasModule) -> dict[str, Any]:
        from orchestrl.algorithms.neuromas.cloning import behaviour_cloning
        from orchestrl.algorithms.neuromas.growth import grow, load_module

        report: dict[str, Any] = {}
        if self.knobs.grow_from:
            small = load_module(self.knobs.grow_from)
            report["growth"] = grow(module, small, noise=self.knobs.growth_noise, seed=self.seed)
        if self.settings.episodes:
            env = NeuromasTeamEnv(self.env_config)
            try:
                demos = collect_demonstrations(
                    env,
                    env.team_expert,
                    self.settings.episodes,
                    seed=self.seed,
                    gamma=self.gamma,
                    noise=self.settings.noise,
                )
            finally:
                env.close()
            env_components = sum(len(nvec) for nvec in env.nvecs.values())
            losses = behaviour_cloning(
                module,
                demos[TEAM],
                self.settings,
                env_components=env_components,
                token_dropout=self.knobs.bc_token_dropout,
                seed=self.seed,
                validation=self._validation_demonstrations(),
                patience=self.knobs.bc_patience,
            )
            for key in ("validation_agreement", "best_epoch"):
                if key in losses:
                    report[f"bc_{key}"] = losses.pop(key)
            report["bc_loss"] = losses.pop("bc")
            report.update({f"bc_{name}_loss": values for name, values in losses.items()})
        return report

    def _validation_demonstrations(self) -> list[Any]:
        """The expert on each validation env (``bc_validation_env``); empty without one."""
        sets = []
        for override in self.knobs.bc_validation_env or ():
            env = NeuromasTeamEnv(
                {**self.env_config, "kwargs": {**self.env_config.get("kwargs", {}), **override}}
            )
            try:
                episodes = self.knobs.bc_validation_episodes
                demos = collect_demonstrations(
                    env, env.team_expert, episodes, seed=self.seed, gamma=self.gamma
                )
            finally:
                env.close()
            sets.append(demos[TEAM])
        return sets
