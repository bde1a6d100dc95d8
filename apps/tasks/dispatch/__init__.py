"""Getting a task's run onto a worker, and knowing who holds it.

`rq_submit` enqueues a run's RQ job (by the dotted name `apps.tasks.jobs.run_task_job`) with
its id from `job_ids`; `queued` writes the "waiting for a free worker" event of a task put on
the queue; `deferral` sends a job back behind the task that holds its workspace or its
conversation's earlier turn, and queues the next one when that task ends; `liveness` is a run's
claim on its task and its process's heartbeat (which tasks have a live run); `leases` keep one
writer per working tree.

Nothing here imports the run machinery, the events or the doors: the task's services sit above.
"""
