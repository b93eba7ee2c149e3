"""MLflow tracking: runs, tag and metric names, reports, statistics."""
