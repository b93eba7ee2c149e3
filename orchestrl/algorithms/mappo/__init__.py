"""MAPPO: decentralised PPO actors with a centralised value function (Yu et al. 2022).

The critic reads the ``global_state`` column that
:class:`~orchestrl.algorithms.joint_columns.AddJointColumns` adds in the learner pipeline; GAE and
the PPO loss only ever call ``module.compute_values``, so no Learner change is needed and env
runners never see the joint state.
"""

from orchestrl.algorithms.mappo.algorithm import MappoConfig, configure_mappo

__all__ = ["MappoConfig", "configure_mappo"]
