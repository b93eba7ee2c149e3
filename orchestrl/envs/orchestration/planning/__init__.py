"""LEMON's planning env (``orchestration_planning``): a team writes the pipeline for an export, one
agent per decision of the synthesiser's own proposer. In the order data flows:

- :mod:`.exports`: source tables as people export them (business domains, names, dirt);
- :mod:`.grammar`: tasks: a pipeline the proposer can write, its wanted table and example rows;
  a user's files as a task of public inputs only;
- :mod:`.choices`: each agent's options, proposed from the public inputs, in canonical order, and
  their public features;
- :mod:`.env`: the PettingZoo env: rounds, the board, the sandboxed run, the score, the label.
"""
