"""Text2SQL: a schema extractor and a SQL composer write one query together (NeuroMAS showcase).

Modules, in data-flow order: :mod:`.schemas` (domains) -> :mod:`.database` (seeded SQLite files) ->
:mod:`.questions` (templates, paraphrases, gold plans) -> :mod:`.bank` (splits, checked answers) ->
:mod:`.observation` / :mod:`.tokenizer` (what agents see) -> :mod:`.actions` (what they choose) ->
:mod:`.query` (plan -> SQL) -> :mod:`.sql_runner` (read-only execution) -> :mod:`.scoring` (reward);
:mod:`.env` ties them together and :mod:`.expert` gives the gold actions. Importing this package
does not import the env (and so not PettingZoo).
"""
