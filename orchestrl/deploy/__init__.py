"""Using a trained team: ask a trained NeuroMAS Text2SQL checkpoint questions about a SQLite file
(:mod:`.ask`) and score a team on a set of questions (:mod:`.score`). Sits above ``training`` and
``tracking`` in the import layers; ``cli.py`` exposes it as ``orchestrl ask``."""
