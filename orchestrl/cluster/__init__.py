"""Ray clusters: submitting orchestrl commands as Ray jobs.

- ``errors.py``: the one-line errors the package raises (``JobsError`` and its subclasses).
- ``connection.py``: the Jobs API address, probing and connecting, the cluster's Ray version and
  nodes, and the Jobs client's exceptions translated into those errors.
- ``tracking_policy.py``: which MLflow tracking URI a cluster job may use, and where the command
  line takes it from.
- ``packaging.py``: what a job is made of: allowed commands, project dir, requirements,
  ``runtime_env``, entrypoint and rebased paths.
- ``lifecycle.py``: plan, submit, list, status, logs, follow and stop a job, and how it ended.
- ``cli.py``: ``orchestrl submit`` and ``orchestrl jobs list|logs|stop``.
"""
