"""The ReAct loop and its helpers: `react` (ReActEngine: run() and execute()), `setup` (what a run
needs before its first step), `state` (the running prompt size, usage and step counts),
`detection` (loop detection), `streaming`, `flow` (the loop's control-flow exceptions), `resume`
(what an interrupted run resumes from, rebuilt from its events), `cancellation` (tokens and the
wall-time limit) and `schema_check` (tool arguments against their schema)."""
