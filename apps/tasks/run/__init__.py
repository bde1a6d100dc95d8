"""A task's run: from an executor's start to the run's last event.

`executors` start a run (inline on this loop, or as an RQ job through `apps.tasks.dispatch`);
`runner` is the only bridge from the engine's events to rows and the channel layer;
`engine_build` builds the engine for a task (its task, tools, verifier); `run_branch` gives a
repository task its worktree and commits; `run_guard` is what a run holds besides its events
(its claim on the task, the workspace's lease, the way out when its events cannot be stored);
`lifecycle` is the engine's lifecycle hooks on the database side; `cancel_watch` brings a
cancel requested anywhere to the running engines; `reaper` ends or resumes the tasks whose
run died; `llm_clients` and `db_threads` are an event loop's shared model client and its
threads' database connections; `agent_check` is `manage.py check_llm --agent`.

The doors start a run through `executors` only. The RQ entry points stay at the app's top
level, `apps.tasks.jobs` and `apps.tasks.worker`: queued jobs and deployed workers name them by
their dotted paths.
"""
