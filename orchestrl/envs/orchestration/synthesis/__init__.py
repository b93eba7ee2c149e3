"""Programming by example on users' exports: evidence read off the tables (:mod:`.evidence`),
candidate steps with priors (:mod:`.proposer`) and the search that deduces the rest from the
example rows (:mod:`.search`)."""

from orchestrl.envs.orchestration.synthesis.search import Program, Synthesis, synthesise

__all__ = ["Program", "Synthesis", "synthesise"]
