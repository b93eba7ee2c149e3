"""NeuroMAS Text2SQL's apps: a trained team answers questions about any SQLite file (:mod:`.ask`,
:mod:`.cli`) and is scored on question sets (:mod:`.score`)."""
