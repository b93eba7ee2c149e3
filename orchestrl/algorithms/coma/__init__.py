"""COMA: counterfactual multi-agent policy gradients (Foerster et al. 2018), on PPO actors.

A centralised, learner-only Q critic sees the global state, the other agents' actions and the
agent's id, and outputs Q for every action of the agent; the counterfactual baseline marginalises
the agent's own action under its policy (one forward pass). The critic learns from TD(lambda)
targets computed with a target network; actors wait for a critic warm-up. Two algorithms:
``coma`` (Eq. 4) and ``coma_cv`` (the baseline scaled by a cross-fitted control-variate
coefficient). See :mod:`orchestrl.algorithms.coma.advantage` for the maths and
:mod:`orchestrl.algorithms.coma.module` for the critic (and its heads over MultiDiscrete actions:
factorised, paired with the first component, or joint).
"""
