"""Counterfactual credit assignment as a drop-in replacement for GAE (shared by LEMON and COMA).

The data path, with what this package adds in brackets::

    env runner: episodes (LEMON: the replay deltas in ``episode.custom_data``, see
                          :mod:`orchestrl.algorithms.lemon.replay`)
    learner pipeline:
        AddOneTsToEpisodesAndTruncate          (RLlib, prepended by PPOLearner)
        [AddJointColumns]                      joint columns per row: team reward, agent index,
                                               global state, the other agents' actions, deltas
                                               (:mod:`orchestrl.algorithms.joint_columns`)
        RLlib's default pieces ... NumpyToTensor
        [a CounterfactualAdvantage subclass]   replaces GeneralAdvantageEstimation (:mod:`.advantage`)
    PPO loss (unchanged): clipped surrogate on ``advantages``, critic regressed on ``value_targets``

- :mod:`.advantage`: the base of the pieces that replace GAE, team GAE, per-agent credit statistics;
- :mod:`.learner`: :class:`~.learner.CounterfactualPPOLearner`, PPO's torch learner with exactly that
  swap, plus target networks and an optional critic learning rate, configured by a
  :class:`~.learner.CreditSpec`;
- :mod:`.table`: the per-agent credit table, put into each iteration's result (written by
  ``orchestrl.tracking``);
- :mod:`.configure`: the :class:`~.learner.CreditSpec` of an estimator or of its ``advantage: gae``
  ablation (``credit_spec_for``, shared by COMA and LEMON), then modules + joint columns + learner +
  callbacks for an experiment (``configure_credit``).
"""
