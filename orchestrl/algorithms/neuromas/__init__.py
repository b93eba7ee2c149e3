"""NeuroMAS: a multi-agent team as one neural network, trained end to end on one shared reward.

After "NeuroMAS: Multi-Agent Systems as Neural Networks with Joint RL" (arXiv 2605.16757). The
pieces, each in its own module:

- :mod:`.topology`: which agent nodes exist (input agents, hidden layers, output agents) and which
  edges carry messages;
- :mod:`.encoders`: what an agent node perceives (an MLP, or a text encoder for Text2SQL);
- :mod:`.network`: the torch graph: shared neurons with node-id embeddings, attention aggregation
  of continuous or discrete messages, action heads, the pooled state the critic reads;
- :mod:`.team_env` and :mod:`.module`: the team exposed to RLlib as one joint actor;
- :mod:`.learner`: the joint loss (PPO or REINFORCE with a baseline, plus the auxiliary reward head);
- :mod:`.warm_start`, :mod:`.growth`: behaviour cloning from the env's expert, and growing a larger
  topology from a trained smaller one;
- :mod:`.algorithm`: the knobs and ``configure_neuromas``.
"""

from orchestrl.algorithms.neuromas.algorithm import NeuromasConfig, configure_neuromas

__all__ = ["NeuromasConfig", "configure_neuromas"]
