"""Errors every layer may raise, so that none has to import a layer above it to report bad input."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad experiment config; the message is one line naming the file and the key.

    Raised wherever a config is checked (the experiment's sections, an algorithm's knobs against its
    env, a sweep or curriculum file) so that the CLI can print it and exit with code 2 before
    anything starts.
    """
