"""Task creation for the chat's sockets (consumers.ChatConsumer's `user_message`), in batches.

When 50 sockets send at once, a transaction per message had each worker thread wait for
SQLite's write lock (asleep in its busy handler, which does not wake when the lock is freed)
while the other sockets' messages queued for a free thread. Here the messages of one serving
loop queue in an `Intake`; one worker thread takes all that are waiting, creates their tasks in
one transaction (creation.task_create_many), prepares their runs and starts them together
(executors.task_submit_many). Messages sent meanwhile form the next batch; a lone message is
a batch of one, with no wait added."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from asgiref.sync import sync_to_async

from apps.tasks import executors, selectors
from apps.tasks.conf import agent_config
from apps.tasks.creation import TaskRequest, task_create_many
from apps.tasks.services import ApplicationError

# The most messages in one transaction: a batch's first message waits for the whole batch.
BATCH_MAX = 64

_intakes: dict[asyncio.AbstractEventLoop, Intake] = {}


def intake() -> Intake:
    """The running loop's intake."""
    loop = asyncio.get_running_loop()
    found = _intakes.get(loop)
    if found is None or found.loop is not loop:
        found = _intakes[loop] = Intake(loop)
    return found


@dataclass
class _Message:
    user: object
    content: dict
    future: asyncio.Future


class Intake:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiting: list[_Message] = []
        self.draining = False

    async def create(self, *, user, content: dict):
        """The task for a socket's `user_message` (a re-sent `client_msg_id`: the task created
        the first time) and whether it was started now. Raises the message's ApplicationError."""
        future = self.loop.create_future()
        self.waiting.append(_Message(user, content, future))
        if not self.draining:
            self.draining = True
            self.loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self.waiting:
                batch, self.waiting = self.waiting[:BATCH_MAX], self.waiting[BATCH_MAX:]
                try:
                    await sync_to_async(self._create, thread_sensitive=False)(batch)
                except BaseException as exc:  # the database failed: every message of the batch
                    for message in batch:
                        _settle(message.future, exc)
                    if not isinstance(exc, Exception):
                        raise
        finally:
            self.draining = False

    def _create(self, batch: list[_Message]) -> None:
        """Blocking, in a worker thread. Each message's outcome reaches its socket through the
        loop, after the runs started (so a socket follows a run already on the loop)."""
        requests: list = []
        workspaces: dict = {}
        for message in batch:
            try:
                requests.append(_request(message.user, message.content, workspaces))
            except ApplicationError as exc:
                requests.append(exc)
        made = task_create_many(
            requests=[r for r in requests if isinstance(r, TaskRequest)], config=agent_config()
        )
        outcomes = iter(made)
        results = [r if isinstance(r, Exception) else next(outcomes) for r in requests]
        new = {
            task.pk: task
            for task in results
            if not isinstance(task, Exception) and task.last_seq == 0 and task.status == "queued"
        }
        try:
            executors.task_submit_many(tasks=list(new.values()))
        except ApplicationError as exc:  # the executor is not usable (rq without Redis)
            results = [exc if getattr(r, "pk", None) in new else r for r in results]
            new = {}
        settled = [
            (m.future, r if isinstance(r, Exception) else (r, r.pk in new))
            for m, r in zip(batch, results, strict=True)
        ]
        self.loop.call_soon_threadsafe(_settle_all, settled)


def _request(user, content: dict, workspaces: dict) -> TaskRequest:
    """The socket's message as a TaskRequest. Its workspace: `workspace` (an id or a name), else
    the conversation's when it continues one, else the user's only workspace; looked up once per
    batch."""
    ref = content.get("workspace")
    workspace = None
    if ref not in (None, "") or content.get("conversation") in (None, ""):
        key = (
            (user.pk, type(ref).__name__, ref) if isinstance(ref, (int, str, type(None))) else None
        )
        if key is not None and key in workspaces:
            workspace = workspaces[key]
        else:
            workspace = _workspace(user, ref)
            if key is not None:
                workspaces[key] = workspace
        if workspace is None:
            raise ApplicationError(
                "workspace not found: pick one of yours", {"error_code": "not_found"}
            )
    return TaskRequest(
        user=user,
        workspace=workspace,
        text=content["text"],
        mode=content.get("mode") or None,
        skill=content.get("skill") or None,
        client_msg_id=str(content.get("client_msg_id") or ""),
        conversation=content.get("conversation"),  # None: a new conversation
    )


def _workspace(user, ref):
    found = selectors.workspace_for_user(user=user, ref=ref)
    if found is None and ref in (None, ""):
        only = list(selectors.workspaces_for_user(user=user)[:2])
        found = only[0] if len(only) == 1 else None
    return found


def _settle(future: asyncio.Future, outcome) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _settle_all(settled: list) -> None:
    for future, outcome in settled:
        _settle(future, outcome)
