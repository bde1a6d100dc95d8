"""Verification of a workspace with real commands: `run` (the Verifier), `commands` (which
commands a workspace gets), `baseline` (failures that predate the task), `condense` (a short
report of a long log)."""
