"""The one listing of environments an experiment can name, and of what each env family brings.

Each entry points at a factory that returns a PettingZoo ``ParallelEnv``. Factories are imported
lazily by dotted path (:func:`orchestrl.dotted.load`), so listing envs never imports torch, pandas
or an env's dependencies, and remote env runners import them from the installed package, not from
the driver's working dir.

An entry also declares what its family adds to the platform, so that the generic layers (training,
tune, tracking, deploy) never name an env: the HTTP endpoints its trained teams serve besides
``/act``, the CLI commands that use them (``orchestrl plan``, ``orchestrl ask``), and the
environment variables a command sets to a folder of its run dir before anything starts (a task
cache). Endpoints and commands live in ``orchestrl.apps.<family>``, above every generic layer; the
registry names them by path and imports nothing of them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pettingzoo import ParallelEnv

from orchestrl.dotted import load
from orchestrl.envs.orchestration.task_store import ENV_VAR as TASK_STORE_VAR


class UnknownEnvError(KeyError):
    """An experiment named an environment that is not registered."""


class EnvKwargError(ValueError):
    """An experiment passed a keyword the environment's factory does not take."""


@dataclass(frozen=True)
class EnvEntry:
    """A registered environment.

    Attributes:
        name: the name experiments use (``env.name`` in YAML).
        factory: ``"module:callable"``; the callable takes the env kwargs and returns a ParallelEnv.
        summary: one line for ``orchestrl envs``.
        family: ``mpe``, ``orchestration``, ``text2sql``...
        signature_of: ``"module:callable"`` whose signature lists the accepted kwargs, when the
            factory itself only takes ``**kwargs`` (PettingZoo's ``parallel_wrapper_fn``).
        horizon_key / default_horizon: where the episode length lives in the kwargs; the centralised
            critic feeds ``t / horizon`` (a fixed-horizon env is not Markov without it).
        defaults: kwargs applied before the experiment's own.
        cache_kwarg: a kwarg naming a data/cache directory; when an experiment leaves it unset the
            builder points it at ``<run_dir>/cache/<env name>`` (absolute, so remote env runners
            on this machine share one copy whatever their working directory).
        endpoints: ``"module:Class"`` of each HTTP endpoint the family's teams serve besides
            ``/act`` (:mod:`orchestrl.deploy.endpoints` says what an endpoint is).
        commands: CLI command name -> ``"module:function"`` (a typer command), mounted by
            ``orchestrl/cli.py``.
        run_dir_env: environment variable -> folder under the run dir; every command sets each
            (unless already set) before Ray starts, so Ray's local workers inherit it.
        vector_factory: ``"module:callable"`` taking ``num_envs``, ``agent_id_in_obs`` and the env
            kwargs, returning one vector env whose copies step as tensors
            (:class:`orchestrl.envs.batched.runner.TensorVectorEnv`); such an env is sampled by
            :class:`~orchestrl.envs.batched.runner.BatchedEnvRunner`, which the builder then picks.
    """

    name: str
    factory: str
    summary: str
    family: str
    signature_of: str | None = None
    horizon_key: str | None = None
    default_horizon: int = 1
    defaults: Mapping[str, Any] = field(default_factory=dict)
    cache_kwarg: str | None = None
    endpoints: tuple[str, ...] = ()
    commands: Mapping[str, str] = field(default_factory=dict)
    run_dir_env: Mapping[str, str] = field(default_factory=dict)
    vector_factory: str | None = None

    def load(self) -> Callable[..., ParallelEnv]:
        return load(self.factory)

    def accepted_kwargs(self) -> set[str] | None:
        """Names the factory accepts, or None when it takes anything."""
        target = load(self.signature_of or self.factory)
        params = inspect.signature(target).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None
        return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}

    def check_kwargs(self, kwargs: Mapping[str, Any]) -> None:
        accepted = self.accepted_kwargs()
        if accepted is None:
            return
        for key in kwargs:
            if key not in accepted:
                raise EnvKwargError(
                    f"env '{self.name}' takes no kwarg '{key}' (it takes: {', '.join(sorted(accepted))})"
                )

    def horizon(self, kwargs: Mapping[str, Any]) -> int:
        if self.horizon_key is None:
            return self.default_horizon
        return int({**self.defaults, **kwargs}.get(self.horizon_key, self.default_horizon))

    def make(self, **kwargs: Any) -> ParallelEnv:
        return self.load()(**{**self.defaults, **kwargs})


def _mpe(name: str, module: str, summary: str) -> EnvEntry:
    return EnvEntry(
        name=name,
        factory=f"mpe2.{module}:parallel_env",
        signature_of=f"mpe2.{module}:raw_env",
        summary=summary,
        family="mpe",
        horizon_key="max_cycles",
        default_horizon=25,
    )


def _orchestration(name: str, factory: str, summary: str) -> EnvEntry:
    """A LEMON env: teams plan with ``orchestrl plan`` and ``/plan``, rounds are its horizon."""
    return EnvEntry(
        name=name,
        factory=factory,
        summary=summary,
        family="orchestration",
        horizon_key="rounds",
        default_horizon=2,
        endpoints=("orchestrl.apps.orchestration.plan:PlanEndpoint",),
        commands={"plan": "orchestrl.apps.orchestration.cli:plan_command"},
        # Generated tasks, shared by every run and process of a run dir (task_store.py).
        run_dir_env={TASK_STORE_VAR: "cache/tasks"},
    )


def _mpe_batched(scenario: str, summary: str) -> EnvEntry:
    """An mpe2 scenario re-implemented as tensors over N copies (:mod:`orchestrl.envs.batched.mpe`)."""
    return EnvEntry(
        name=f"{scenario}_batched",
        factory=f"orchestrl.envs.batched.mpe_env:{scenario}",
        signature_of=f"orchestrl.envs.batched.mpe:{scenario}",
        vector_factory=f"orchestrl.envs.batched.mpe_env:{scenario}_vector",
        summary=summary,
        family="mpe",
        horizon_key="max_cycles",
        default_horizon=25,
    )


ENVS: dict[str, EnvEntry] = {
    e.name: e
    for e in [
        _mpe("simple_spread", "simple_spread_v3", "N agents cover N landmarks; shared reward (mpe2)"),
        _mpe(
            "simple_speaker_listener",
            "simple_speaker_listener_v4",
            "a mute listener is guided to a landmark by a speaker that cannot move (mpe2)",
        ),
        _mpe(
            "simple_reference", "simple_reference_v3", "two agents each guide the other to a landmark (mpe2)"
        ),
        _mpe_batched(
            "simple_spread", "simple_spread as torch tensors over N copies per env runner (mpe2's maths)"
        ),
        _mpe_batched(
            "simple_speaker_listener",
            "simple_speaker_listener as torch tensors over N copies per env runner (mpe2's maths)",
        ),
        _mpe_batched(
            "simple_reference",
            "simple_reference as torch tensors over N copies per env runner (mpe2's maths)",
        ),
        _orchestration(
            "orchestration",
            "orchestrl.envs.orchestration.env:OrchestrationEnv",
            "LEMON: agents write a data-pipeline spec that is compiled and run in a sandbox "
            "(as root: PID/network namespaces, chroot, own uid; without root: rlimits and an "
            "audit hook, a tripwire, not a boundary; sandbox_isolation: strict refuses that)",
        ),
        _orchestration(
            "orchestration_planning",
            "orchestrl.envs.orchestration.planning.env:PlanningEnv",
            "LEMON on exports as people bring them: one agent per decision of the synthesiser's "
            "proposer (each table's cleaning, the joins, two filters); the pipeline runs in the sandbox",
        ),
        EnvEntry(
            name="text2sql",
            factory="orchestrl.envs.text2sql.env:Text2SQLEnv",
            summary="NeuroMAS showcase: a team turns a question into SQL, scored on real SQLite",
            family="text2sql",
            default_horizon=1,
            cache_kwarg="data_dir",
            endpoints=("orchestrl.apps.text2sql.ask:AskEndpoint",),
            commands={"ask": "orchestrl.apps.text2sql.cli:ask_command"},
        ),
        EnvEntry(
            name="matrix_game",
            factory="orchestrl.envs.matrix.env:MatrixGameEnv",
            summary="two agents, one move, a shared payoff table; exact counterfactuals (credit tests)",
            family="matrix",
            default_horizon=1,
        ),
    ]
}


def register(entry: EnvEntry) -> None:
    """Adds an env (e.g. from a user's own package) to the registry."""
    ENVS[entry.name] = entry


def get_env(name: str) -> EnvEntry:
    try:
        return ENVS[name]
    except KeyError:
        raise UnknownEnvError(f"unknown env '{name}' (registered: {', '.join(sorted(ENVS))})") from None


def family_endpoints(family: str) -> tuple[str, ...]:
    """The endpoints (``"module:Class"``) the teams of ``family`` serve besides ``/act``."""
    paths = (path for e in ENVS.values() if e.family == family for path in e.endpoints)
    return tuple(dict.fromkeys(paths))


def app_commands() -> dict[str, str]:
    """Every entry's CLI commands, name -> ``"module:function"``."""
    return {name: path for e in ENVS.values() for name, path in e.commands.items()}


def run_dir_environment(run_dir: Path) -> dict[str, str]:
    """Every entry's ``run_dir_env``, as variable -> absolute folder under ``run_dir``."""
    root = run_dir.resolve()
    return {var: str(root / folder) for e in ENVS.values() for var, folder in e.run_dir_env.items()}


def make_env(name: str, **kwargs: Any) -> ParallelEnv:
    """Builds a registered env after checking its kwargs."""
    entry = get_env(name)
    entry.check_kwargs(kwargs)
    return entry.make(**kwargs)
