"""JSON API (ARCHITECTURE.md section 6). Authenticated by session (+CSRF) or
`Authorization: Bearer <token>`. Errors are JSON {"error": {"code", "message"}} with a fitting
status code. Views validate input and call one service or selector."""

from __future__ import annotations

import json
from functools import wraps

from django.http import JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from apps.tasks import selectors, services
from apps.tasks.conf import agent_config
from apps.tasks.run import executors
from apps.tasks.services import ApplicationError
from apps.tasks.workspaces import changes

MAX_BODY_BYTES = 256 * 1024


def error(status: int, code: str, message: str, **extra) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, **extra}}, status=status)


def _csrf_failure(request) -> JsonResponse | None:
    checker = CsrfViewMiddleware(lambda req: None)
    response = checker.process_view(request, None, (), {})
    if response is not None:
        return error(
            403,
            "csrf_failed",
            "CSRF check failed: send the X-CSRFToken header with the csrftoken cookie, or use a bearer token",
        )
    return None


def api_view(methods: tuple[str, ...]):
    """Authenticate (bearer token or session+CSRF), check the method, translate errors."""

    def decorate(view):
        @csrf_exempt
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if request.method not in methods:
                return error(405, "method_not_allowed", f"use {' or '.join(methods)}")
            header = request.headers.get("Authorization", "")
            if header:
                scheme, _, key = header.partition(" ")
                if scheme.lower() != "bearer" or not key.strip():
                    return error(401, "bad_authorization", "use 'Authorization: Bearer <token>'")
                user = services.api_token_authenticate(key=key.strip())
                if user is None:
                    return error(
                        401,
                        "invalid_token",
                        "the token is unknown or revoked; create one with 'manage.py create_api_token USER'",
                    )
                request.user = user
            elif not request.user.is_authenticated:
                return error(
                    401, "not_authenticated", "log in, or send 'Authorization: Bearer <token>'"
                )
            elif request.method not in ("GET", "HEAD", "OPTIONS"):
                failure = _csrf_failure(request)
                if failure is not None:
                    return failure
            try:
                return view(request, *args, **kwargs)
            except ApplicationError as exc:
                code = exc.extra.get("error_code", "invalid_request")
                status = {"not_found": 404, "forbidden": 403}.get(code, 400)
                return error(status, code, exc.message)

        return wrapper

    return decorate


def _json_body(request) -> dict:
    if len(request.body) > MAX_BODY_BYTES:
        raise ApplicationError(
            f"request body over {MAX_BODY_BYTES} bytes", {"error_code": "too_large"}
        )
    try:
        body = json.loads(request.body or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApplicationError(
            f"the body is not valid JSON: {exc}", {"error_code": "invalid_json"}
        ) from None
    if not isinstance(body, dict):
        raise ApplicationError("the body must be a JSON object", {"error_code": "invalid_json"})
    return body


def task_payload(task, user=None) -> dict:
    payload = {
        "id": task.pk,
        "status": task.status,
        "mode": task.mode,
        "skill": task.skill,
        "goal": task.goal,
        "workspace": {"id": task.workspace_id, "name": task.workspace.name},
        "result": task.result,
        "error": task.error,
        "conversation": task.conversation_id,
        "usage": selectors.usage_summary([task.usage]) if task.usage else task.usage,
        "cost": task.cost,
        # verified | unverified | no_changes | the failure's error code (None while running)
        "outcome": selectors.task_outcome(task),
        "last_seq": task.last_seq,
        "created_at": task.created_at.isoformat(),
        "started_at": task.started_at.isoformat() if task.started_at else None,
        "finished_at": task.finished_at.isoformat() if task.finished_at else None,
    }
    if task.branch:  # a task on a repository workspace (docs/repositories.md)
        payload |= {"branch": task.branch, "commit": task.commit, "base_commit": task.base_commit}
    if task.mode in ("plan_exec", "team_collab"):  # the chat page offers Resume (team.js)
        from apps.specs.checkpoints import task_interrupted

        payload["resumable"] = task_interrupted(task)
    if task.status == "queued":  # one writer per workspace: whom it waits for (leases.py)
        from apps.tasks.dispatch.leases import waiting_for

        payload["waiting_for"] = waiting_for(task)
    return payload | failure_fields(task, user)


# ── failure handling (apps/engine/failure/fallback.py) ──────────────────────────────────────────────────
def failure_fields(task, user=None) -> dict:
    """Keys only a failed or retried task has: error_struct {error_code, message, suggestions,
    retryable}, error_message (the human-readable form), salvage, retry_of, and original_error
    for the task's owner. A task without them keeps the payload it always had."""
    from apps.engine.failure.fallback import EmergencyError

    extra: dict = {}
    if task.retry_of_id is not None:
        extra["retry_of"] = task.retry_of_id
    if isinstance(task.error, dict) and task.error.get("error_code"):
        struct = {
            "error_code": task.error["error_code"],
            "message": task.error.get("message", ""),
            "suggestions": list(task.error.get("suggestions") or []),
            "retryable": bool(task.error.get("retryable")),
        }
        extra["error_struct"] = struct
        extra["error_message"] = EmergencyError(**struct).to_error_message()
        if task.salvage:
            extra["salvage"] = task.salvage
        if task.original_error and user is not None and user.pk == task.user_id:
            extra["original_error"] = task.original_error
    return extra


@api_view(("GET", "POST"))
def tasks(request):
    if request.method == "GET":
        found = selectors.tasks_for_user(user=request.user, query=request.GET.get("q", "")[:200])
        return JsonResponse(
            {
                "tasks": [
                    {**task_payload(t, request.user), "mine": t.user_id == request.user.pk}
                    for t in found
                ]
            }
        )
    body = _json_body(request)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ApplicationError(
            "'text' is required: what the agent should do", {"error_code": "missing_field"}
        )
    workspace_ref, conversation = body.get("workspace"), body.get("conversation")
    workspace = None
    if workspace_ref in (None, "") and conversation in (None, ""):
        raise ApplicationError(
            "'workspace' is required (its id or name; GET /api/workspaces lists them), unless "
            "'conversation' continues one",
            {"error_code": "missing_field"},
        )
    if workspace_ref not in (None, ""):
        workspace = selectors.workspace_for_user(user=request.user, ref=workspace_ref)
        if workspace is None:
            raise ApplicationError("workspace not found", {"error_code": "not_found"})
    mode, skill = body.get("mode"), body.get("skill")
    for name, value in (("mode", mode), ("skill", skill)):
        if value is not None and not isinstance(value, str):
            raise ApplicationError(f"'{name}' must be a string", {"error_code": "invalid_field"})
    task = services.task_create(
        user=request.user,
        workspace=workspace,
        text=text,
        mode=mode,
        skill=skill,
        client_msg_id=str(body.get("client_msg_id") or ""),
        config=agent_config(),
        conversation=conversation,
    )
    created = getattr(task, "created_now", False)
    if created:  # a re-sent `client_msg_id` (a retry after a lost answer): its task, as it is
        executors.task_submit(task_id=task.pk)
    return JsonResponse(
        {"id": task.pk, "status": task.status, "conversation": task.conversation_id},
        status=201 if created else 200,
    )


@api_view(("GET", "DELETE"))
def task_detail(request, task_id: int):
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    if request.method == "DELETE":
        try:
            services.task_delete(user=request.user, task=task)
        except ApplicationError as exc:
            if exc.extra.get("error_code") == "forbidden":
                return error(403, "forbidden", exc.message)
            raise
        return JsonResponse({"id": task_id, "deleted": True})
    return JsonResponse(
        {**task_payload(task, request.user), "mine": task.user_id == request.user.pk}
    )


@api_view(("GET",))
def task_events(request, task_id: int):
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    raw_after = request.GET.get("after", "0")
    if not raw_after.isdigit():
        return error(
            400, "invalid_field", "'after' must be a non-negative integer (the last seq you have)"
        )
    events = selectors.task_events_after(task=task, seq=int(raw_after))
    return JsonResponse({"events": [event.as_message() for event in events]})


@api_view(("POST",))
def task_cancel(request, task_id: int):
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    requested = services.task_request_cancel(task=task)
    task.refresh_from_db()
    return JsonResponse({"id": task.pk, "status": task.status, "cancel_requested": requested})


@api_view(("GET",))
def task_changes(request, task_id: int):
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    payload = {"id": task.pk, "files": changes.changes_payload(task=task)}
    if task.branch:  # base...branch and its commits (handoffs.py)
        from apps.tasks.workspaces.handoffs import branch_changes

        payload["branch"] = branch_changes(task=task, config=agent_config())
    return JsonResponse(payload)


@api_view(("POST",))
def task_revert(request, task_id: int):
    """{"path": "a/b.py"} reverts one file; {} every file the task changed."""
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    path = _json_body(request).get("path")
    if path is not None and not isinstance(path, str):
        raise ApplicationError("'path' must be a string", {"error_code": "invalid_field"})
    reverted = changes.task_revert(user=request.user, task=task, path=path)
    return JsonResponse({"id": task.pk, "reverted": reverted})


def conversation_payload(conversation) -> dict:
    tasks = sorted(conversation.tasks.all(), key=lambda task: task.pk)
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "workspace": {"id": conversation.workspace_id, "name": conversation.workspace.name},
        "tasks": [{"id": t.pk, "status": t.status, "goal": t.goal} for t in tasks],
        "usage": selectors.usage_summary([t.usage for t in tasks], [t.cost for t in tasks]),
        "created_at": conversation.created_at.isoformat(),
        "updated_at": conversation.updated_at.isoformat(),
    }


@api_view(("GET",))
def conversations(request):
    return JsonResponse(
        {
            "conversations": [
                conversation_payload(c) for c in selectors.conversations_for_user(user=request.user)
            ]
        }
    )


@api_view(("GET", "PATCH"))
def conversation_detail(request, conversation_id: int):
    conversation = selectors.conversation_for_user(
        user=request.user, conversation_id=conversation_id
    )
    if conversation is None:
        return error(404, "not_found", "conversation not found")
    if request.method == "PATCH":  # {"title": "..."}: rename it
        services.conversation_rename(
            conversation=conversation, title=_json_body(request).get("title")
        )
    return JsonResponse(conversation_payload(conversation))


@api_view(("POST",))
def task_retry(request, task_id: int):
    """Retry a failed task whose error is retryable: a new task, same goal, `retry_of` it."""
    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    retry = services.task_retry(user=request.user, task=task)
    executors.task_submit(task_id=retry.pk)
    return JsonResponse(
        {
            "id": retry.pk,
            "status": retry.status,
            "conversation": retry.conversation_id,
            "retry_of": task.pk,
        },
        status=201,
    )


@api_view(("POST",))
def task_resume(request, task_id: int):
    """Resume a plan_exec or team_collab task interrupted by a process restart, from its
    checkpoints (apps/specs/checkpoints.py)."""
    from apps.specs.checkpoints import task_resume as resume

    task = selectors.task_for_user(user=request.user, task_id=task_id)
    if task is None:
        return error(404, "not_found", "task not found")
    resume(task=task)
    executors.task_submit(task_id=task.pk)
    return JsonResponse({"id": task.pk, "status": task.status, "resumed": True}, status=202)
