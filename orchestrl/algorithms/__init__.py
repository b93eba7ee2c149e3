"""RLModules, learner connectors and learners: one sub-package per algorithm."""
