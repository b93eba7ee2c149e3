"""PettingZoo environments and the registry that names them (see :mod:`orchestrl.envs.registry`)."""

from orchestrl.envs.registry import ENVS, EnvEntry, get_env, make_env

__all__ = ["ENVS", "EnvEntry", "get_env", "make_env"]
