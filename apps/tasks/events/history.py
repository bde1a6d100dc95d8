"""A conversation's earlier turns as engine messages: what a follow-up task is given as history.

Each earlier finished task of the conversation becomes two messages: the user's goal, then an
assistant message holding a compressed account of its tool work (one line per call: tool,
arguments, outcome, first line of output) followed by its final answer (or why it failed). The
text is a pure function of stored rows, so it is byte-identical every time it is rebuilt: the
prompt prefix of turn N+1 repeats turn N's and stays cached. Oldest turns are dropped first when
the whole history passes HISTORY_MAX_CHARS (an answer longer than half of it is cut, with a note
of its length); inside a run the compressor takes over from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from apps.engine.llm.types import Message
from apps.tasks.models import FINAL_STATUSES, Task, TaskEvent

HISTORY_MAX_CHARS = 60_000
ANSWER_MAX_CHARS = HISTORY_MAX_CHARS // 2  # of one turn's answer (answer_for_history)
MAX_CALLS_PER_TURN = 30
LINE_CHARS = 160


def _one_line(text: str, limit: int = LINE_CHARS) -> str:
    first = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def tool_work(events: Iterable[TaskEvent]) -> list[str]:
    """One line per tool call of a task, in order, from its tool_call/tool_result events."""
    calls: dict[str, dict] = {}
    lines: list[str] = []
    for event in events:
        data = event.data or {}
        if event.type == "tool_call":
            calls[str(data.get("call_id"))] = data
        elif event.type == "tool_result":
            call = calls.get(str(data.get("call_id")), {})
            args = json.dumps(call.get("arguments") or {}, sort_keys=True, ensure_ascii=False)
            name = data.get("name") or call.get("name") or "tool"
            ok = data.get("ok", True)
            detail = _one_line(
                (data.get("output") if ok else data.get("error") or data.get("output")) or ""
            )
            outcome = ("ok" if ok else "error") + (f": {detail}" if detail else "")
            lines.append(f"- {name} {_one_line(args, 120)} -> {outcome}")
    if len(lines) > MAX_CALLS_PER_TURN:
        dropped = len(lines) - MAX_CALLS_PER_TURN
        lines = [f"- ({dropped} earlier calls left out)", *lines[-MAX_CALLS_PER_TURN:]]
    return lines


def answer_for_history(result: str) -> str:
    """A turn's answer (the task's whole result) as the history gives it: up to
    ANSWER_MAX_CHARS, else its start and a note of its length (an answer of megabytes
    would otherwise fill the next turn's prompt by itself)."""
    answer = result.strip()
    if len(answer) <= ANSWER_MAX_CHARS:
        return answer
    return (
        answer[:ANSWER_MAX_CHARS] + f"\n[… the rest of this answer is left out: it is "
        f"{len(answer):,} characters in all]"
    )


def turn_messages(task: Task, events: Sequence[TaskEvent]) -> tuple[Message, Message]:
    work = tool_work(events)
    result = answer_for_history(task.result)
    if task.status == "completed":
        answer = result or "(no answer)"
    else:
        reason = (task.error or {}).get("message") or task.status
        answer = (result + "\n\n" if result else "") + (
            f"(this turn ended {task.status}: {reason})"
        )
    text = answer
    if work:
        text = "[Tool work of this turn]\n" + "\n".join(work) + "\n\n[Answer]\n" + answer
    return Message("user", task.goal), Message("assistant", text)


def conversation_history(task: Task) -> tuple[Message, ...]:
    """The earlier finished turns of `task`'s conversation, oldest first (empty for a new one:
    without a conversation, or as services.task_create returns a task that opened one)."""
    if task.conversation_id is None or getattr(task, "opens_conversation", False):
        return ()
    earlier = list(
        Task.objects.filter(
            conversation_id=task.conversation_id, pk__lt=task.pk, status__in=FINAL_STATUSES
        )
        .exclude(pk__in=retried_chain(task))  # a retry starts over: not its failed attempts
        .order_by("pk")
    )
    if not earlier:
        return ()
    events: dict[int, list[TaskEvent]] = {t.pk: [] for t in earlier}
    for event in TaskEvent.objects.filter(
        task_id__in=list(events), type__in=("tool_call", "tool_result")
    ).order_by("task_id", "seq"):
        events[event.task_id].append(event)
    turns = [turn_messages(t, events[t.pk]) for t in earlier]
    kept: list[tuple[Message, Message]] = []
    size = 0
    for turn in reversed(turns):
        size += sum(len(m.content) for m in turn)
        if kept and size > HISTORY_MAX_CHARS:
            break
        kept.append(turn)
    return tuple(message for turn in reversed(kept) for message in turn)


def retried_chain(task: Task, limit: int = 20) -> list[int]:
    """The ids of the failed tasks `task` retries: its retry_of, that one's, and so on."""
    ids: list[int] = []
    current = task.retry_of_id
    while current is not None and current not in ids and len(ids) < limit:
        ids.append(current)
        current = Task.objects.filter(pk=current).values_list("retry_of_id", flat=True).first()
    return ids
