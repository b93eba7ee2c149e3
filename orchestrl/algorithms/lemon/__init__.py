"""LEMON: exact counterfactual credit by replaying each agent's edited choice (arXiv 2605.14483).

At each episode's end the env runner applies ONE edit to each agent's part of the spec the final
step executed (revert duty to base, drop an edge, downgrade capacity, or an alternative from the
agent's own policy), re-executes it through the env's counterfactual API and stores
``delta_i = R(spec) - R(edited)``; the learner centres each delta per agent and edit family and
mixes it with the team GAE advantage on the row of the agent's final action. In MARL terms:
a difference reward (Wolpert & Tumer 2002) with LEMON's edits as the default action, biased where
an edit depends on the agent's own action (see ``lemon_advantages``).

- :mod:`orchestrl.envs.counterfactual`: what an env implements (the protocol lives below the
  algorithms, so envs never import an algorithm).
- :mod:`.replay`: runner side (edit-family sampling, re-execution, cost accounting), configured
  by one ``ReplaySettings`` built from ``LemonConfig``.
- :mod:`.advantage`: learner side (the advantage maths).
- :mod:`.algorithm`: knobs and configuration.
"""
