"""LEMON's apps: a trained orchestration team plans on a user's own tables (:mod:`.plan`, :mod:`.cli`)."""
