"""MLflow tracking: the run store (the only MLflow client), every tag and metric name, curated
metrics, Tune trial runs, reports and statistics, the UI."""
