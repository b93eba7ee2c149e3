"""Development tools that are not part of the orchestrl package (import-linter contract types)."""
