"""Using a trained team: evaluate a checkpoint, serve it over HTTP (Ray Serve), ask a Text2SQL team.

``team.py`` finds a trained team from a run id or a checkpoint folder; ``evaluate.py`` scores it
greedily on its env; ``serve.py`` answers HTTP requests with it; ``ask.py`` asks a trained NeuroMAS
Text2SQL team questions about a SQLite file and ``score.py`` scores one on a set of questions;
``cli.py`` holds their commands.
"""
