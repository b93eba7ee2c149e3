"""The sandbox that runs generated pipelines: pool, worker, confinement, framing."""
