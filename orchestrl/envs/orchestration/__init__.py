"""LEMON: a team of agents writes an executable data-pipeline spec that is compiled, run for
real in a sandbox, and scored. Entry point: :class:`.env.OrchestrationEnv` (registered as
``orchestration``). Modules, in the order data flows:

- :mod:`.domains`, :mod:`.tasks`, :mod:`.distractors`: seeded tasks (source tables, hidden
  reference, target, candidate duties);
- :mod:`.evidence`, :mod:`.features`: what agents may know, as observation vectors;
- :mod:`.actions`: MultiDiscrete actions -> spec nodes, factorised masks;
- :mod:`.spec`: the pydantic spec schema and its YAML form;
- :mod:`.compiler`, :mod:`.ops`: spec -> stand-alone pandas module;
- :mod:`.sandbox`, :mod:`.worker`, :mod:`.confine`, :mod:`.protocol`: the confined worker pool;
- :mod:`.executor`: node-level execution with a node cache;
- :mod:`.tables`, :mod:`.reward`: comparing with the target, the reward terms;
- :mod:`.expert`, :mod:`.counterfactual`: the reference solver and single-node edits.

Importing this package starts nothing; the sandbox pool starts on the first executed spec.
"""
