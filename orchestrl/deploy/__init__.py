"""Using a trained team: evaluate a checkpoint, serve it over HTTP (Ray Serve).

``team.py`` finds a trained team from a run id or a checkpoint folder; ``evaluate.py`` scores it
greedily on its env; ``serve.py`` answers HTTP requests with it; ``cli.py`` holds their commands.
"""
