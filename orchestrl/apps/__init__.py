"""Each env family's own apps: what a trained team of that family does for a user.

``orchestration/``: ``orchestrl plan`` and ``POST /plan`` (a pipeline for the user's own tables);
``text2sql/``: ``orchestrl ask`` and ``POST /ask`` (SQL about the user's own SQLite file), and the
scoring of a team on question sets. A family declares its endpoints and commands in its registry
entry (:mod:`orchestrl.envs.registry`); ``orchestrl serve`` and the CLI find them there, so no
generic layer names a family. This layer sits above deploy: an app may use a found team
(:mod:`orchestrl.deploy.team`) and the endpoint protocol (:mod:`orchestrl.deploy.endpoints`).
"""
