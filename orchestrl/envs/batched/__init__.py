"""Envs whose copies step together as tensors, and the RLlib env runner that samples them in bulk.

- :mod:`orchestrl.envs.batched.mpe`: the maths of three mpe2 scenarios over N copies;
- :mod:`orchestrl.envs.batched.mpe_env`: those copies as a PettingZoo env (one copy) and as RLlib's
  ``VectorMultiAgentEnv`` (all copies);
- :mod:`orchestrl.envs.batched.runner`: :class:`~orchestrl.envs.batched.runner.BatchedEnvRunner`,
  RLlib's ``MultiAgentEnvRunner`` stepping such a vector env without a Python loop over copies.

Registered as ``simple_spread_batched``, ``simple_speaker_listener_batched`` and
``simple_reference_batched`` (:mod:`orchestrl.envs.registry`).
"""
