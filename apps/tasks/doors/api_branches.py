"""The hand-offs of a repository task's branch (handoffs.py, docs/repositories.md):
`GET /api/tasks/<id>/patch` (a `git format-patch` mbox, text/plain), `POST .../merge`, `.../push`,
`.../discard` → 200 {"ok": true, ...} or 409 {"error": {"code", "message", "files"?}}."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse

from apps.tasks import selectors
from apps.tasks.conf import agent_config
from apps.tasks.doors.api import api_view, error
from apps.tasks.vcs.git import GitError
from apps.tasks.workspaces import handoffs


def _answer(request, task_id: int, act) -> HttpResponse:
    """`act(task)`'s response for the user's task: 404 when it is not theirs, 409 with the
    reason when the hand-off is refused or git fails (its message redacted: git.py)."""
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    try:
        return act(task)
    except handoffs.HandoffRefused as exc:
        extra = {"files": exc.files} if exc.files is not None else {}
        return error(409, exc.code, exc.message, **extra)
    except GitError as exc:
        return error(409, "git_failed", str(exc))


def _handoff(action):
    @api_view(("POST",))
    def view(request, task_id: int):
        return _answer(
            request,
            task_id,
            lambda task: JsonResponse(action(user=request.user, task=task, config=agent_config())),
        )

    return view


task_merge = _handoff(handoffs.task_merge)
task_push = _handoff(handoffs.task_push)
task_discard = _handoff(handoffs.task_discard)


@api_view(("GET",))
def task_patch(request, task_id: int):
    def patch(task) -> HttpResponse:
        text = handoffs.task_patch(task=task, config=agent_config())
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="task-{task.pk}.patch"'
        return response

    return _answer(request, task_id, patch)
