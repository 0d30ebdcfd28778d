"""Small helpers every layer may use: YAML loading, user-text grammars, progress output, package data.
Nothing here imports another part of trainkit (errors.py aside)."""
