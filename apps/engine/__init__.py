"""The agent runtime, framework-free (no Django). A map:

- `events`, `ports`, `task`, `tools`: the shared vocabulary (events, the ports the engine calls
  out through, a task and its result, tools and their results).
- `config/`: agentkit.yaml loaded and validated, one module per group of sections.
- `loop/`: the ReAct loop (`loop.react.ReActEngine`) and its helpers.
- `plan/`: the plan_exec mode: phases and their gate, planner, spec stage, verification, reflexion.
- `team/`: the team_collab mode: orchestrator, members, setup, rollback.
- `context/`: what the model sees: the prompt and its compression.
- `failure/`: the failure chain: fallback and recovery.
- `llm/`: the model gateway, providers, streaming. `sandbox/`: running commands isolated.
- `evals/`: the built-in HumanEval suite and its reference policies.
"""
