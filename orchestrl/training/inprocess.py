"""Sampling and learning in this process, with Ray never started.

An RLlib env runner and learner built straight from the ``PPOConfig`` that ``orchestrl train`` uses,
so unit tests, smoke tests and small benchmarks exercise the same modules and connectors in seconds.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

from orchestrl.algorithms.behaviour_cloning import configured_warm_start


class InProcessTrainer:
    """One env runner + one learner; ``step()`` = sample, update, sync weights."""

    def __init__(self, ppo_config: Any) -> None:
        self.config = ppo_config
        self.runner = MultiAgentEnvRunner(config=ppo_config)
        self.learner = ppo_config.build_learner(env=None, spaces=self.runner.get_spaces())
        hook = configured_warm_start(ppo_config)
        self.warm_start = dict(hook(self.learner)) if hook is not None else {}
        """What the algorithm's warm start reported (e.g. the BC loss per module and epoch; {}
        without one): the same hook ``orchestrl train`` runs on every learner."""
        self.sync_weights()

    def sample(self, num_timesteps: int | None = None) -> list:
        n = num_timesteps or self.config.train_batch_size_per_learner
        return self.runner.sample(num_timesteps=n, explore=True)

    def step(self, num_timesteps: int | None = None) -> dict[str, Any]:
        """One PPO iteration; returns the learner's reduced results per module."""
        return self.update(self.sample(num_timesteps))

    def update(self, episodes: list) -> dict[str, Any]:
        """One learner update on ``episodes``, then the runner gets the new weights; returns the
        learner's reduced results per module."""
        results = self.learner.update(
            episodes=episodes,
            num_epochs=self.config.num_epochs,
            minibatch_size=self.config.minibatch_size,
            shuffle_batch_per_epoch=self.config.shuffle_batch_per_epoch,
        )
        self.sync_weights()
        return _peek(results)

    def sync_weights(self) -> None:
        self.runner.set_state({"rl_module": self.learner.module.get_state(inference_only=True)})

    def learner_batch(self, episodes: list) -> dict[str, Any]:
        """What the learner pipeline makes of ``episodes`` (per-module tensors), for inspection."""
        return self.learner._learner_connector(
            rl_module=self.learner.module, batch={}, episodes=episodes, shared_data={}, metrics=None
        )

    def stop(self) -> None:
        self.runner.stop()


def _peek(tree: Any) -> Any:
    """Reduced RLlib stats -> plain floats."""
    if isinstance(tree, dict):
        return {k: _peek(v) for k, v in tree.items()}
    return tree.peek() if hasattr(tree, "peek") else tree
