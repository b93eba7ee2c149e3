"""Cloned actors kept on disk, so that runs whose warm start would be the same clone once.

A warm start (:mod:`.behaviour_cloning`) plays the env's expert, DAgger rounds included, and fits
the actors: minutes on the LEMON env's larger levels, and every run of a comparison that differs
only after it (another RL algorithm, another learning rate; ``benchmarks/team_vs_search.py``'s
lemon, ippo and cloning continued) paid them again. With ``warm_start.reuse`` the first such run
stores its actors' weights and the losses it reported under the run dir's cache
(``<run_dir>/cache/<env>/warm_starts``), and the others load them.

A clone is stored under a digest of everything it depends on (:meth:`WarmStartStore.key`): the
warm-start settings, the env's config, the seed, which module serves which agent, each module's
actor: the classes whose code computes its actions (:func:`actor_code`), its layers and parameter
shapes (the critic's do not matter: algorithms with other critics, COMA's Q critic among them,
share a clone), and orchestrl's source with the torch and numpy versions, so changed code clones
again instead of loading a stale clone. A run cloning holds a
lock on its key: a run wanting the same clone meanwhile waits for it, then loads it. A file that
cannot be read is cloned again; files are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from orchestrl.files import source_digest, write_atomically

PACKAGE = Path(__file__).resolve().parents[1]
"""The orchestrl package, whose source a stored clone depends on (the env's expert, the actor)."""


def actor_code(module_class: type) -> list[str]:
    """The classes whose code decides what an actor of ``module_class`` computes: those in its MRO
    that define one of its ``actor_methods`` (a module without that list: the class itself). Two
    classes with the same list act alike, given the same actor weights."""
    methods = getattr(module_class, "actor_methods", None)
    if methods is None:
        return [_name(module_class)]
    return [_name(c) for c in module_class.__mro__ if any(m in vars(c) for m in methods)]


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class WarmStartStore:
    """One directory of cloned actors, one file per :meth:`key`."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def key(
        self,
        settings: Mapping[str, Any],
        env_config: Mapping[str, Any],
        seed: int,
        served: Mapping[str, str],
        modules: Mapping[str, Any],
    ) -> str:
        """The digest naming the clone of ``modules`` (module id -> RLModule with an ``actor``) that
        a warm start with ``settings`` (its knobs, ``reuse`` left out), on ``env_config``, from
        ``seed``, with ``served`` (agent -> module id) makes."""
        payload = {
            "settings": {k: v for k, v in settings.items() if k != "reuse"},
            "env": env_config,
            "seed": int(seed),
            "served": dict(served),
            "modules": {
                mid: {
                    "code": actor_code(type(m)),
                    "actor": repr(m.actor),  # its layers, sizes and activations (not the critic's)
                    "shapes": [(n, list(p.shape)) for n, p in m.actor.named_parameters()],
                }
                for mid, m in sorted(modules.items())
            },
            "code": source_digest(PACKAGE, ("torch", "numpy")),
        }
        text = json.dumps(payload, sort_keys=True, default=repr)
        return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()

    @contextlib.contextmanager
    def claimed(self, key: str) -> Iterator[Path]:
        """The path of ``key``'s clone, with its lock held (released on exit): load it, or clone and
        :meth:`save` it, while no other process can."""
        self.root.mkdir(parents=True, exist_ok=True)
        with (self.root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self.root / f"{key}.pt"
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self, path: Path, modules: Mapping[str, Any]) -> dict[str, list[float]] | None:
        """Loads the stored actors into ``modules`` and returns the losses their warm start
        reported; None when nothing is stored (or the file is unreadable: then it is removed)."""
        try:
            stored = torch.load(path, weights_only=True)
            states = {mid: stored["actors"][mid] for mid in modules}
        except FileNotFoundError:
            return None
        except Exception:  # truncated, foreign or for other modules: clone again
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        for mid, module in modules.items():
            module.actor.load_state_dict(states[mid])
        return {name: list(values) for name, values in stored["history"].items()}

    def save(self, path: Path, modules: Mapping[str, Any], history: Mapping[str, list[float]]) -> None:
        """Stores ``modules``' actors and ``history`` atomically; an unwritable store is skipped."""
        stored = {
            "actors": {mid: m.actor.state_dict() for mid, m in modules.items()},
            "history": {name: [float(v) for v in values] for name, values in history.items()},
        }
        write_atomically(path, lambda handle: torch.save(stored, handle))
