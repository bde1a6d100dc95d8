"""The rows of new tasks (services.task_create for one message; task_create_many for the
messages of several sockets at once, apps/tasks/doors/intake.py): the checks of each message before
the transaction, then one transaction with the re-send lookup and the INSERTs."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from apps.tasks import selectors
from apps.tasks.errors import ApplicationError
from apps.tasks.models import Conversation, Task, TaskEvent, Workspace
from apps.tasks.routing import Routing, max_message_chars, route_message

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskRequest:
    """One message asking for a task (task_create's arguments, for task_create_many)."""

    user: object
    workspace: Workspace | None
    text: str
    mode: str | None = None
    skill: str | None = None
    client_msg_id: str = ""
    conversation: object = None  # None: a new conversation
    model: str = ""
    # `workspace` was looked up among the user's own (selectors.workspace_for_user) just now:
    # its membership need not be read again
    member_checked: bool = False


@dataclass(frozen=True)
class _Checked:
    request: TaskRequest
    workspace: Workspace
    continued: Conversation | None
    routing: Routing | ApplicationError  # a routing error counts only if it is not a re-send


def _check(request: TaskRequest, config, members: set | None = None) -> _Checked:
    """The reads before the transaction: the conversation, the membership, the length.
    `members`: the (workspace, user) pairs already checked in this batch."""
    continued = None
    workspace = request.workspace
    if request.conversation not in (None, ""):
        continued = _conversation_to_continue(
            user=request.user, conversation=request.conversation, workspace=workspace
        )
        workspace = continued.workspace
    if workspace is None:
        raise ApplicationError("workspace not found", {"error_code": "not_found"})
    # The membership row itself, one prepared statement (every socket's task creation asks).
    pair = (workspace.pk, request.user.pk)
    if request.member_checked and workspace is request.workspace and members is not None:
        members.add(pair)
    if members is None or pair not in members:
        if not selectors.is_workspace_member(workspace_id=pair[0], user_id=pair[1]):
            raise ApplicationError("workspace not found", {"error_code": "not_found"})
        if members is not None:
            members.add(pair)
    limit = max_message_chars()
    if len(request.text) > limit:
        raise ApplicationError(
            f"the message is too long ({len(request.text)} characters; at most {limit}): shorten "
            "it, or put the long text in a file in the workspace and refer to it",
            {"error_code": "message_too_long"},
        )
    if "\x00" in request.text:  # PostgreSQL cannot store it; no one types it
        raise ApplicationError(
            "the message contains a NUL character (\\x00): remove it and send it again",
            {"error_code": "invalid_field"},
        )
    try:
        routing = route_message(
            text=request.text, mode=request.mode, skill=request.skill, config=config
        )
    except ApplicationError as exc:
        routing = exc
    return _Checked(request, workspace, continued, routing)


def create_one(request: TaskRequest, config) -> Task:
    """services.task_create: the task, or the ApplicationError raised."""
    (outcome,) = _create_rows([_check(request, config)])
    if isinstance(outcome, ApplicationError):
        raise outcome
    return outcome


def task_create_many(*, requests: list[TaskRequest], config, opening=None) -> list:
    """task_create for several messages at once (sockets sending together, apps/tasks/doors/intake.py):
    the checks of each, then ONE transaction with one re-send lookup per user and one INSERT per
    table, instead of a transaction per message that each waits for the database's write lock.
    Returns, in order, each message's task or the error that concerns it alone (an
    ApplicationError; a DatabaseError when the database refused its rows). If the transaction
    fails, each message is created on its own, so no message fails for another's sake.

    `opening` (queued.QueuedOpening): the new tasks' first events, written in the same
    transaction (the tasks go in with their `last_seq`)."""
    checked: list = []
    members: set = set()
    for request in requests:
        try:
            checked.append(_check(request, config, members))
        except ApplicationError as exc:
            checked.append(exc)
    try:
        return _create_rows(checked, opening)
    except DatabaseError:
        logger.warning("creating %s tasks together failed; creating each alone", len(requests))
    outcomes = []
    for request, first in zip(requests, checked, strict=True):
        if isinstance(first, ApplicationError):
            outcomes.append(first)
            continue
        try:
            (outcome,) = _create_rows([_check(request, config)], opening)
        except (ApplicationError, DatabaseError) as exc:  # this message's alone
            outcome = exc
        outcomes.append(outcome)
    return outcomes


def _create_rows(checked: list, opening=None) -> list:
    """In one transaction: re-sent messages get their first task; the others get a conversation
    (unless they continue one) and a task, inserted together. `checked`: _Checked or an
    ApplicationError (kept as the outcome)."""
    outcomes: list = list(checked)
    live = [(i, c) for i, c in enumerate(checked) if isinstance(c, _Checked)]
    if not live:
        return outcomes
    with transaction.atomic():
        resent = _resent_tasks(c.request for _, c in live)
        opened: list[Conversation] = []
        continued: dict[int, Conversation] = {}
        created: list[tuple[int, Task]] = []
        for i, c in live:
            key = _message_key(c.request)
            if key in resent:  # sent before, or earlier in this batch
                outcomes[i] = resent[key]
                continue
            if isinstance(c.routing, ApplicationError):
                outcomes[i] = c.routing
                continue
            conversation = c.continued
            if conversation is None:
                conversation = Conversation(
                    user=c.request.user, workspace=c.workspace, title=c.routing.text[:200]
                )
                opened.append(conversation)
            else:
                continued[conversation.pk] = conversation
            task = Task(
                workspace=c.workspace,
                user=c.request.user,
                conversation=conversation,
                mode=c.routing.mode,
                skill=c.routing.skill,
                goal=c.routing.text,
                client_msg_id=c.request.client_msg_id[:100],
                model=c.request.model,
            )
            # Known to have no earlier turns: history.conversation_history need not look (the
            # instance only; a task read from the database again looks).
            task.opens_conversation = c.continued is None
            task.created_now = True  # not a re-sent message's (the JSON API submits only these)
            created.append((i, task))
            if key is not None:
                resent[key] = task
        _insert(Conversation, opened)
        if continued:  # most recent conversations first
            now = timezone.now()
            Conversation.objects.filter(pk__in=list(continued)).update(updated_at=now)
            for conversation in continued.values():
                conversation.updated_at = now
        tasks = [task for _, task in created]
        if opening is not None:
            for task in tasks:
                task.last_seq = 1
        _insert(Task, tasks)
        events = opening.events(tasks) if opening is not None and tasks else []
        if events:
            TaskEvent.objects.bulk_create(events)
    if opening is not None:
        opening.written(events)
    for i, task in created:
        outcomes[i] = task
    return outcomes


def _message_key(request: TaskRequest) -> tuple[int, str] | None:
    msg_id = str(request.client_msg_id or "")[:100]
    return (request.user.pk, msg_id) if msg_id else None


def _resent_tasks(requests) -> dict[tuple[int, str], Task]:
    """The first task of each (user, client_msg_id) among `requests` that exists already."""
    by_user: dict[int, set[str]] = {}
    for request in requests:
        key = _message_key(request)
        if key is not None:
            by_user.setdefault(key[0], set()).add(key[1])
    found: dict[tuple[int, str], Task] = {}
    for user_id, msg_ids in by_user.items():
        if len(msg_ids) == 1:  # the usual single message: one prepared statement, no ORM query
            (msg_id,) = msg_ids
            task_id = selectors.task_id_for_message(user_id=user_id, client_msg_id=msg_id)
            ids = [task_id] if task_id is not None else []
        else:
            ids = selectors.task_ids_for_messages(user_id=user_id, client_msg_ids=msg_ids)
        if ids:
            for task in Task.objects.select_related("workspace").filter(pk__in=ids):
                found[(task.user_id, task.client_msg_id)] = task
    return found


def _insert(model, objects: list) -> None:
    """INSERT the new rows together, their ids set on them (one statement where the backend
    returns ids from a multi-row INSERT: SQLite >= 3.35, PostgreSQL)."""
    if not objects:
        return
    if connection.features.can_return_rows_from_bulk_insert:
        model.objects.bulk_create(objects)
        return
    for obj in objects:
        obj.save(force_insert=True)


def _conversation_to_continue(*, user, conversation, workspace: Workspace | None) -> Conversation:
    """The user's own conversation `conversation` (an id); its workspace must be `workspace`."""
    if isinstance(conversation, bool) or not (
        isinstance(conversation, int) or (isinstance(conversation, str) and conversation.isdigit())
    ):
        raise ApplicationError(
            "'conversation' must be a conversation id (an integer), or left out to start a new one",
            {"error_code": "invalid_field"},
        )
    found = selectors.conversation_for_user(user=user, conversation_id=int(conversation))
    if found is None:
        raise ApplicationError(
            "conversation not found: leave 'conversation' out to start a new one",
            {"error_code": "not_found"},
        )
    if workspace is not None and workspace.pk != found.workspace_id:
        raise ApplicationError(
            f"conversation {found.pk} belongs to workspace {found.workspace.name!r}; start a new "
            "conversation to work in another workspace",
            {"error_code": "workspace_mismatch"},
        )
    return found
