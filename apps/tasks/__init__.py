"""Workspaces, conversations, tasks and their events: the Django side of agentkit's runs.

Django's own files sit at the top (models, admin, apps, urls, checks, migrations/,
management/), with the app's shared vocabulary (conf, services, selectors, creation, routing,
errors, failure, bootstrap) and the RQ entry points that queued jobs and deployed workers name
by dotted path (jobs, worker). Then one package per concern, each importing only those below it:

    doors/       where requests come in: the JSON API, the chat socket, pages, /healthz,
                 /metrics, the /mcp tools
    run/         a task's run: executors, the runner, the engine's build, the run's guard and
                 hooks, cancel, the reaper
    workspaces/  workspaces, repository workspaces, a task's changes, hand-offs
    events/      a task's events: written (recorder, writer), sent (local delivery, channel
                 layer), read back as history; the minimal end of a task no run can end
    vcs/         git, task worktrees, branch snapshots
    dispatch/    RQ submission, job ids, queued and deferred runs, liveness, leases
    batch/       batch runs and their evaluation
    ops/         metrics, traces, event retention
"""
