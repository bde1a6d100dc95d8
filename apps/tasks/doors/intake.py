"""Task creation for the chat's sockets (consumers.ChatConsumer's `user_message`), in batches.

When 50 sockets send at once, a transaction per message had each worker thread wait for
SQLite's write lock (asleep in its busy handler, which does not wake when the lock is freed)
while the other sockets' messages queued for a free thread. Here the messages of one serving
loop queue in an `Intake`; one worker thread takes all that are waiting and creates their tasks
in one transaction (creation.task_create_many); then each workspace's new runs are prepared in a
thread of their own and start together (executors.task_submit_many). With executor rq there is
nothing to prepare: the same thread queues the batch's jobs right after creating their tasks, and
each socket gets its task's `task_waiting` (seq 1) from memory, not from the database. Messages
sent meanwhile form the next batch; a lone message is a batch of one, with no wait added."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from dataclasses import dataclass, field

from asgiref.sync import sync_to_async
from django.db import DatabaseError

from apps.tasks import selectors
from apps.tasks.conf import agent_config
from apps.tasks.creation import TaskRequest, task_create_many
from apps.tasks.run import executors
from apps.tasks.run.db_threads import RecyclingExecutor
from apps.tasks.services import ApplicationError

log = logging.getLogger(__name__)

# The most messages in one transaction: a batch's first message waits for the whole batch.
BATCH_MAX = 64

_intakes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop -> Intake


def intake() -> Intake:
    """The running loop's intake."""
    loop = asyncio.get_running_loop()
    found = _intakes.get(loop)
    if found is None:
        found = _intakes[loop] = Intake()
    return found


@dataclass(frozen=True)
class Created:
    """What a socket's message led to: its task; whether it was submitted now (False: a re-sent
    message's task, already under way or over); the events stored for it meanwhile (with
    executor rq, its `task_waiting`), for the socket to send without reading them back."""

    task: object
    submitted: bool
    events: list = field(default_factory=list)


@dataclass
class _Message:
    user: object
    content: dict
    future: asyncio.Future


class Intake:
    def __init__(self):
        self.lock = threading.Lock()  # `waiting` and `draining`: the loop adds, a thread takes
        self.waiting: list[_Message] = []
        self.draining = False
        self.drainers: set[asyncio.Task] = set()  # referenced: the loop keeps tasks weakly
        self.starters: set[asyncio.Task] = set()
        # The intake's own thread (one drain at a time): in the loop's shared pool a burst's
        # batch waited behind the same burst's handshakes (their session look-ups) queued there.
        self.executor = RecyclingExecutor(max_workers=1, thread_name_prefix="agentkit-intake")

    async def create(self, *, user, content: dict) -> Created:
        """The task for a socket's `user_message` (a re-sent `client_msg_id`: the task created
        the first time), whether it was started now, and its events stored meanwhile. Raises the
        message's error."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self.lock:
            self.waiting.append(_Message(user, content, future))
            start, self.draining = not self.draining, True
        if start:
            drain = sync_to_async(self._drain, thread_sensitive=False, executor=self.executor)
            drainer = loop.create_task(drain(loop))
            self.drainers.add(drainer)
            drainer.add_done_callback(self.drainers.discard)
        return await future

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """Blocking, in a worker thread: the batches, one after the other, until none waits. The
        thread takes the next batch itself, without a trip back to the loop (which, busy with a
        burst's handshakes, would start it tens of milliseconds later)."""
        while True:
            with self.lock:
                if not self.waiting:
                    self.draining = False
                    return
                batch, self.waiting = self.waiting[:BATCH_MAX], self.waiting[BATCH_MAX:]
            try:
                self._create(batch, loop)
            except BaseException as exc:  # the database failed: every message of the batch
                loop.call_soon_threadsafe(_settle_all, [(m.future, exc) for m in batch])
                if not isinstance(exc, Exception):
                    with self.lock:
                        self.draining = False
                    raise

    def _create(self, batch: list[_Message], loop: asyncio.AbstractEventLoop) -> None:
        """Blocking, in a worker thread. A message's outcome reaches its socket through the
        loop; a new task's only once its run started (so the socket follows a run that is on
        the loop already)."""
        requests: list = []
        workspaces: dict = {}
        for message in batch:
            try:
                requests.append(_request(message.user, message.content, workspaces))
            except ApplicationError as exc:
                requests.append(exc)
        # With executor rq, the new tasks' queued events go in with them (queued.QueuedOpening).
        opening = executors.rq_opening()
        made = iter(
            task_create_many(
                requests=[r for r in requests if isinstance(r, TaskRequest)],
                config=agent_config(),
                opening=opening,
            )
        )
        done: list = []
        groups: dict[str, list] = {}  # workspace directory -> [(future, new task)]
        # With executor rq nothing is prepared here: the batch's jobs are queued together, in
        # the order the messages came (grouped by workspace, one workspace's jobs would queue
        # side by side, and the workers taking them would wait on its lease one after another).
        by_workspace = agent_config().executor.kind != "rq"
        for message, request in zip(batch, requests, strict=True):
            outcome = request if isinstance(request, Exception) else next(made)
            if isinstance(outcome, DatabaseError):  # the database refused this message's rows
                log.error("the task of a message could not be stored: %s", outcome)
                outcome = ApplicationError(
                    "the task could not be stored (the server log says why); send the message "
                    "again, and report it if this keeps happening",
                    {"error_code": "task_not_stored"},
                )
            if isinstance(outcome, Exception):
                done.append((message.future, outcome))
            elif (
                outcome.pk in opening.messages  # created now, with its queued event
                if opening is not None
                else outcome.last_seq == 0 and outcome.status == "queued"
            ):
                key = outcome.workspace.root_dir if by_workspace else ""
                groups.setdefault(key, []).append((message.future, outcome))
            else:  # re-sent: its run is under way or over
                done.append((message.future, Created(outcome, False)))
        loop.call_soon_threadsafe(_settle_all, done)
        if not by_workspace:  # rq: a job per task, no preparation; here and now
            for group in groups.values():
                _start(group, loop, opening.messages if opening is not None else None)
            return
        # Each workspace's runs are prepared in a thread of their own, after this one returns:
        # the next batch's creation and another workspace's runs do not wait for a repository
        # map (up to repo_map.time_limit_seconds for a huge workspace).
        for group in groups.values():
            loop.call_soon_threadsafe(self._start_elsewhere, group, loop)

    def _start_elsewhere(self, group: list, loop: asyncio.AbstractEventLoop) -> None:
        starter = loop.create_task(sync_to_async(_start, thread_sensitive=False)(group, loop))
        self.starters.add(starter)
        starter.add_done_callback(self.starters.discard)


def _start(group: list, loop: asyncio.AbstractEventLoop, written: dict | None = None) -> None:
    """Blocking: prepare and start the runs of one workspace's new tasks together; then their
    sockets learn of them."""
    tasks = list({task.pk: task for _, task in group}.values())  # a message sent twice: once
    try:
        written = {
            **executors.task_submit_many(tasks=tasks, recorded=written is not None),
            **(written or {}),
        }
    except Exception as exc:  # the executor is not usable (rq without Redis), or a crash
        loop.call_soon_threadsafe(_settle_all, [(future, exc) for future, _ in group])
        return
    settled = [(future, Created(task, True, written.get(task.pk, []))) for future, task in group]
    loop.call_soon_threadsafe(_settle_all, settled)


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
        member_checked=workspace is not None,  # found among the user's (_workspace)
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
