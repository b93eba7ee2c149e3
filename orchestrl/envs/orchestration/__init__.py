"""LEMON: a team of agents infers a data pipeline from source tables and a few rows of the wanted
output, and writes it as a spec that is compiled, run for real in a sandbox, and scored against
the whole hidden target. Entry point: :class:`.env.OrchestrationEnv` (registered as
``orchestration``). Modules, in the order data flows:

- :mod:`.domains`, :mod:`.tasks`: seeded tasks (public inputs: source tables, the target's
  columns, example rows; hidden: the reference pipeline and the rest of the target);
- :mod:`.profiles`, :mod:`.candidates`, :mod:`.analysis`: column profiles, candidate duties
  proposed from the public inputs, and what can be read off them without searching;
- :mod:`.features`: the observation vectors (public inputs and execution feedback only);
- :mod:`.actions`: MultiDiscrete actions -> spec nodes (table references, ``auto``), masks;
- :mod:`.plans`: stages, the level skeletons, canonical wiring, in-process runs;
- :mod:`.solver`: the search over the public inputs that is the expert the warm start clones;
- :mod:`.spec`: the pydantic spec schema and its YAML form;
- :mod:`.compiler`, :mod:`.ops`: spec -> stand-alone pandas module;
- :mod:`.sandbox`: the confined worker pool; :mod:`.executor`: node-level execution with a cache;
- :mod:`.tables`, :mod:`.reward`: comparing with the target, the reward terms;
- :mod:`.edits`: single-node edits for counterfactual re-execution;
- :mod:`.synthesis`: the synthesiser ``orchestrl plan`` falls back on (proposer, deduction, search);
- :mod:`.planning`: the planning env (``orchestration_planning``): exports drawn from one grammar,
  one agent per decision of the synthesiser's proposer, a user's files through the same code.

Importing this package starts nothing; the sandbox pool starts on the first executed spec.
"""
