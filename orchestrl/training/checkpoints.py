"""Building an RLlib Algorithm whose files stay in the run dir, and its checkpoints.

An Algorithm built outside Tune makes ``~/ray_results/<stamp>`` for its logs; handing it a
``StorageContext`` (the object Tune itself passes to every trainable) keeps them in the run dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.rllib.algorithms import Algorithm


def build_algorithm(ppo_config: Any, storage_dir: Path) -> Any:
    from ray.train._internal.storage import StorageContext

    storage_dir.mkdir(parents=True, exist_ok=True)
    storage = StorageContext(
        storage_path=str(storage_dir.resolve()), experiment_dir_name="algorithm", trial_dir_name="trial"
    )
    return ppo_config.algo_class(config=ppo_config, storage=storage)


def save_checkpoint(algo: Algorithm, checkpoints_dir: Path, iteration: int) -> str:
    """Saves the whole algorithm (modules, optimisers, connector states) and returns its path."""
    path = checkpoints_dir.resolve() / f"iter_{iteration:06d}"
    algo.save_to_path(str(path))
    return str(path)
