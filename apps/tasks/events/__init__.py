"""A task's events: where each is written, and where it is sent.

`recorder` batches a run's engine events into rows (`seq` order) and hands each committed batch
on; `event_writer` is the thread that writes those batches; `local_delivery` hands them to the
sockets of this process and `group_publish` to the channel layer, in order, off the flush path;
`history` turns a conversation's earlier turns into the engine messages a
follow-up task is given; `ending` is the minimal write
path that ends a task no run can end itself (final status, `error`, `task_finished`).

Events never import the doors (API, sockets, views): the sockets register with
`local_delivery` through its `Follower` protocol.
"""
