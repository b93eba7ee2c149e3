"""Generated tasks kept on disk, so that runs on the same task pool generate each task once.

Generating a level-3 or level-4 task (sources built, then checked against every candidate) costs
far more than reading it back (``benchmarks/task_store.py``; ``benchmarks/RESULTS.md``, section
"Task store"), and without a store every run on a pool of 1,000 tasks generated all of them again:
a large share of a level-3 credit benchmark run. A
run's process keeps its tasks in memory (``tasks.TASK_CACHE``); this store keeps them across
processes and runs.

``ORCHESTRL_TASK_STORE`` names the store's directory; unset or empty, nothing is stored. Commands
set it to ``<run_dir>/cache/tasks`` unless it is set (``training.runtime.quiet_environment``).
Tasks are pickled under a digest of the generator's source and the library versions it depends on,
so a changed generator starts an empty store instead of serving stale tasks (the older digests'
directories are left for the user to delete). The store is only an optimisation: a file that
cannot be read is generated again, and one that cannot be written is skipped. Load only stores you
wrote: they are pickles, like RLlib's checkpoints.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrl.files import source_digest, write_atomically

if TYPE_CHECKING:
    from orchestrl.envs.orchestration.tasks import Task

ENV_VAR = "ORCHESTRL_TASK_STORE"
PACKAGE = Path(__file__).resolve().parent


@functools.cache
def generator_digest(package: Path = PACKAGE) -> str:
    """A digest of every module of the orchestration package, its subpackages included (the
    generators and what they call), and of the Python, numpy and pandas versions: what a stored
    task depends on."""
    return source_digest(package, ("numpy", "pandas"))


class TaskStore:
    """One directory of pickled tasks, one file per ``(level, split, seed)`` (a planning task's:
    ``planning-<split>-<seed>``)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root) / generator_digest()

    def path(self, level: int, split: str, seed: int) -> Path:
        return self.root / f"level{level}-{split}-{seed}.pkl"

    def load(self, level: int, split: str, seed: int) -> Task | None:
        """The stored task, or None (not stored, or unreadable: then the file is removed)."""
        return self.load_file(self.path(level, split, seed))

    def load_file(self, path: Path) -> Any:
        """The object pickled at ``path``, or None (as :meth:`load`)."""
        try:
            with path.open("rb") as handle:
                return pickle.load(handle)
        except FileNotFoundError:
            return None
        except Exception:  # truncated or foreign: generate it again
            with contextlib.suppress(OSError):
                path.unlink()
            return None

    def save(self, task: Task) -> None:
        """Stores ``task`` atomically (concurrent writers of one task leave one whole file);
        an unwritable store is skipped."""
        key = task.key
        self.save_file(self.path(key.level, key.split, key.seed), task)

    def save_file(self, path: Path, task: Any) -> None:
        """Pickles ``task`` at ``path`` (as :meth:`save`)."""
        write_atomically(path, lambda handle: pickle.dump(task, handle, protocol=pickle.HIGHEST_PROTOCOL))


def active_store() -> TaskStore | None:
    """The store ``ORCHESTRL_TASK_STORE`` names, if any."""
    root = os.environ.get(ENV_VAR, "")
    return TaskStore(root) if root else None
