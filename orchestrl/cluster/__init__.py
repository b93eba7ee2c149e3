"""Ray clusters: submitting orchestrl commands as Ray jobs."""
