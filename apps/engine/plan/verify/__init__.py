"""Verification of a workspace with real commands: `run` (the Verifier and the engine's adapter
to it), `results` (what a verification reports), `commands` (which commands a workspace gets),
`baseline` (findings and failures that predate the task), `condense` (a short report of a long
log)."""
