"""Text2SQL: a schema extractor and a SQL composer write one query together (NeuroMAS showcase).

Modules, in data-flow order: :mod:`.schemas` (domains and how people talk about them) ->
:mod:`.database` (seeded SQLite files) -> :mod:`.values` (stored values, for value linking) ->
:mod:`.questions` (kinds and gold plans), phrased by :mod:`.grammar` (training) and
:mod:`.grammar_heldout` (test only) -> :mod:`.bank` (splits, checked answers; :mod:`.handwritten`
loads questions people wrote) -> :mod:`.tokenizer` / :mod:`.word_vectors` / :mod:`.observation`
(what agents see) -> :mod:`.actions` (what they choose) -> :mod:`.query` (plan <-> SQL) ->
:mod:`.sql_runner` (read-only execution) -> :mod:`.scoring` (reward); :mod:`.env` ties them
together and :mod:`.expert` gives the gold actions. :mod:`.introspect` reads any SQLite file's
schema for ``orchestrl ask``. Importing this package does not import the env (and so not PettingZoo).
"""
