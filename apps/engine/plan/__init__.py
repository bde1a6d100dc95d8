"""The plan_exec mode and the quality loop: `phases` (phase whitelists, budgets, auto-advance),
`gate` (the phase gate), `planner`, `spec` (the spec draft) and `spec_stage` (spec review before
execution), `verification_gate` (verification at the final answer), `reflexion`, and `verify/`
(running the verification commands: `run`, `commands`, `baseline`, `condense`)."""
