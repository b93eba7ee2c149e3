"""A one-step cooperative 2-agent matrix game whose counterfactual credit is known in closed form."""

from orchestrl.envs.matrix.env import CLIMBING_GAME, MatrixGameEnv

__all__ = ["CLIMBING_GAME", "MatrixGameEnv"]
