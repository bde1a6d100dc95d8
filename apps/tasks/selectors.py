from __future__ import annotations

import functools

from django.db import connection
from django.db.models import QuerySet

from apps.tasks.models import FINAL_STATUSES, Task, Workspace


def workspaces_for_user(*, user) -> QuerySet[Workspace]:
    if not user.is_authenticated:
        return Workspace.objects.none()
    return Workspace.objects.filter(members=user).order_by("name")


def workspace_for_user(*, user, ref) -> Workspace | None:
    """A workspace the user belongs to, by id (int or digit string) or by name; else None."""
    workspaces = workspaces_for_user(user=user)
    if isinstance(ref, int) or (isinstance(ref, str) and ref.isdigit()):
        return workspaces.filter(pk=int(ref)).first()
    if isinstance(ref, str) and ref:
        return workspaces.filter(name=ref).first()
    return None


@functools.cache
def _sql(kind: str) -> str:
    """The start path's two lookups and the end's status read as plain statements, built once:
    every socket's task runs them, and the ORM's compilation of a filtered query costs more than
    SQLite's answer."""
    qn = connection.ops.quote_name
    if kind == "status":
        meta = Task._meta
        return f"SELECT {qn(meta.get_field('status').column)} FROM {qn(meta.db_table)} WHERE {qn(meta.pk.column)} = %s"
    if kind == "member":
        through = Workspace.members.through._meta
        workspace, user = (qn(through.get_field(name).column) for name in ("workspace", "user"))
        return (
            f"SELECT 1 FROM {qn(through.db_table)} WHERE {workspace} = %s AND {user} = %s LIMIT 1"
        )
    meta = Task._meta
    return (  # the tasks_task_user_client_msg index (migration 0007)
        f"SELECT {qn(meta.pk.column)} FROM {qn(meta.db_table)} "
        f"WHERE {qn(meta.get_field('user').column)} = %s "
        f"AND {qn(meta.get_field('client_msg_id').column)} = %s "
        f"ORDER BY {qn(meta.pk.column)} LIMIT 1"
    )


def is_workspace_member(*, workspace_id: int, user_id: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_sql("member"), (workspace_id, user_id))
        return cursor.fetchone() is not None


def task_id_for_message(*, user_id: int, client_msg_id: str) -> int | None:
    """The user's task first created for `client_msg_id` (a re-sent message), else None."""
    with connection.cursor() as cursor:
        cursor.execute(_sql("resent"), (user_id, client_msg_id[:100]))
        row = cursor.fetchone()
    return row[0] if row else None


def task_ids_for_messages(*, user_id: int, client_msg_ids) -> list[int]:
    """The user's first task for each of `client_msg_ids` that has one (re-sent messages)."""
    first: dict[str, int] = {}
    rows = Task.objects.filter(user_id=user_id, client_msg_id__in=[m[:100] for m in client_msg_ids])
    for msg_id, task_id in rows.order_by("-pk").values_list("client_msg_id", "pk"):
        first[msg_id] = task_id
    return sorted(first.values())


@functools.cache
def _task_rows_sql(model, statuses: int) -> str:
    qn = connection.ops.quote_name
    meta = model._meta
    sql = f"SELECT 1 FROM {qn(meta.db_table)} WHERE {qn(meta.get_field('task').column)} = %s"
    if statuses:
        marks = ", ".join(["%s"] * statuses)
        sql += f" AND {qn(meta.get_field('status').column)} IN ({marks})"
    return sql + " LIMIT 1"


def task_has_rows(model, *, task_id: int, statuses: tuple[str, ...] = ()) -> bool:
    """Whether `model` (with a `task` foreign key, and a `status` when `statuses` is given) has
    a row for the task: one plain statement, built once per model. The end of every run asks
    a few of these (an open spec? injected pitfalls? a prompt run?), nearly always "no", and
    the ORM's compilation of each cost more than SQLite's answer."""
    with connection.cursor() as cursor:
        cursor.execute(_task_rows_sql(model, len(statuses)), (task_id, *statuses))
        return cursor.fetchone() is not None


def task_status(*, task_id: int) -> str | None:
    """The task's stored status, None when there is no such task."""
    with connection.cursor() as cursor:
        cursor.execute(_sql("status"), (task_id,))
        row = cursor.fetchone()
    return row[0] if row else None


def task_for_user(*, user, task_id):
    """The task if the user may see it (member of its workspace), else None — callers answer
    "not found" either way, so another user's task is never revealed."""
    from apps.tasks.models import Task

    try:
        task_id = int(task_id)
    except (TypeError, ValueError):
        return None
    if not user.is_authenticated:
        return None
    return (
        Task.objects.select_related("workspace").filter(pk=task_id, workspace__members=user).first()
    )


def tasks_for_user(*, user, limit: int = 50, query: str = ""):
    """Newest first; `query` keeps the tasks whose text contains it (case-insensitive)."""
    from apps.tasks.models import Task

    tasks = Task.objects.filter(workspace__members=user).select_related("workspace")
    if query.strip():
        tasks = tasks.filter(goal__icontains=query.strip())
    return tasks[:limit]


def task_events_after(*, task, seq: int = 0, limit: int = 5000):
    from apps.tasks.models import TaskEvent

    return list(TaskEvent.objects.filter(task=task, seq__gt=seq).order_by("seq")[:limit])


def task_events_after_id(*, task_id: int, seq: int = 0, limit: int = 5000):
    """Events of a task the caller already checked access to."""
    from apps.tasks.models import TaskEvent

    return list(TaskEvent.objects.filter(task_id=task_id, seq__gt=seq).order_by("seq")[:limit])


def task_last_seqs(*, task_ids) -> dict[int, int]:
    from apps.tasks.models import Task

    return dict(Task.objects.filter(pk__in=list(task_ids)).values_list("pk", "last_seq"))


# ── conversations and usage ────────────────────────────────────────────────────────────────────
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "llm_calls",
)


def conversation_for_user(*, user, conversation_id: int):
    """The user's own conversation, else None (another user's answers like a missing one)."""
    from apps.tasks.models import Conversation

    if not user.is_authenticated:
        return None
    return (
        Conversation.objects.select_related("workspace")
        .filter(pk=conversation_id, user=user, workspace__members=user)
        .first()
    )


def conversations_for_user(*, user, limit: int = 50):
    from apps.tasks.models import Conversation

    if not user.is_authenticated:
        return []
    return list(
        Conversation.objects.filter(user=user, workspace__members=user)
        .select_related("workspace")
        .prefetch_related("tasks")[:limit]
    )


def usage_summary(usages, costs=()) -> dict:
    """Token totals of one or more `Task.usage` dicts, with the prompt-cache hit rate: the share
    of prompt tokens read from the cache (None before any prompt token)."""
    totals = {key: 0 for key in USAGE_KEYS}
    for usage in usages:
        for key in USAGE_KEYS:
            value = (usage or {}).get(key)
            if isinstance(value, int):
                totals[key] += value
    if any(isinstance(usage, dict) and usage.get("estimated") for usage in usages):
        totals["estimated"] = True  # some counts were estimated from text: shown with "~"
    prompt = totals["input_tokens"]
    totals["cache_hit_rate"] = round(totals["cache_read_tokens"] / prompt, 4) if prompt else None
    totals["cost"] = round(sum(costs), 6)
    return totals


def conversation_usage(*, conversation) -> dict:
    tasks = list(conversation.tasks.all())
    return usage_summary([t.usage for t in tasks], [t.cost for t in tasks])


# ── the admin's task page ──────────────────────────────────────────────────────────────────────
USAGE_LABELS = (
    ("input_tokens", "input tokens"),
    ("cache_read_tokens", "of which read from the cache"),
    ("cache_write_tokens", "written to the cache"),
    ("output_tokens", "output tokens"),
    ("llm_calls", "model calls"),
)


def usage_rows(usage) -> list[tuple[str, str]]:
    """A task's usage as (label, figure) rows, the known keys first; nothing for no usage."""
    usage = usage if isinstance(usage, dict) else {}
    known = dict(USAGE_LABELS)
    rows = [(label, f"{usage[key]:,}") for key, label in USAGE_LABELS if key in usage]
    rows += [
        (key.replace("_", " "), str(value))
        for key, value in sorted(usage.items())
        if key not in known
    ]
    return rows


def task_model_label(*, task) -> str:
    """The model the task ran on, as the chat shows it: "alias (provider)". The alias is the one
    its task_started event names, else the task's own, else the configured main one."""
    from apps.tasks.conf import agent_config
    from apps.tasks.models import TaskEvent

    started = TaskEvent.objects.filter(task=task, type="task_started").order_by("seq").first()
    alias = (started.data or {}).get("model") if started is not None else None
    config = agent_config()
    alias = alias or task.model or config.llm.main
    model = config.models.get(alias)
    return f"{alias} ({model.provider})" if model is not None else alias


# ── a task's outcome (TaskResult.outcome, Task.outcome) ────────────────────────────────────────
OUTCOME_WORDS = {
    "verified": "verified: its checks ran and passed",
    "unverified": "changed files without running a check",
    "no_changes": "finished without changing anything",
}


def task_outcome(task: Task) -> str | None:
    """`verified` | `unverified` | `no_changes` | the failure's error code; None while the task
    has not ended. A task ended without a run's outcome (cancelled before it started, a team
    run) gets its error code, else `unverified` when completed, else its status."""
    if task.outcome:
        return task.outcome
    if task.status not in FINAL_STATUSES:
        return None
    if isinstance(task.error, dict) and task.error.get("error_code"):
        return str(task.error["error_code"])
    return "unverified" if task.status == "completed" else task.status


def outcome_words(outcome: str | None) -> str:
    """The outcome in plain words for people (chat, admin, run_tasks' table)."""
    if outcome is None:
        return ""
    return OUTCOME_WORDS.get(outcome, outcome.replace("_", " "))
