"""LEMON: exact counterfactual credit by replaying each agent's edited choice (arXiv 2605.14483).

At each episode's end the env runner applies ONE edit to each agent's part of the team's spec
(revert duty to base, drop an edge, downgrade capacity, or an alternative from the agent's own
policy), re-executes it through the env's counterfactual API and stores
``delta_i = R(spec) - R(edited)``; the learner mixes each agent's delta with the team GAE advantage.

- :mod:`orchestrl.envs.counterfactual`: what an env implements (the protocol lives below the
  algorithms, so envs never import an algorithm).
- :mod:`.replay`: runner side (edit-family sampling, re-execution, cost accounting).
- :mod:`.advantage`: learner side (the advantage maths).
- :mod:`.algorithm`: knobs and configuration.
"""
