"""The team_collab mode: `orchestrator` (runs the phases, each by the expert its role names),
`members` (what each expert is asked, the errors that end a team task, the totals), `setup` (what
a team run checks and prepares before its phases), `failed_phase` (validation → rollback →
checkpoint of a failed phase) and `rollback` (rollback commands and git workspace snapshots)."""
