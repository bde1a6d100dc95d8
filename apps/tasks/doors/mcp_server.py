"""agentkit as an MCP server: the tools another agent (Claude Code, Cursor, Codex, any MCP client)
calls over `/mcp` (streamable HTTP; agentkit_site/mcp_endpoint.py mounts it and refuses a request
without a valid bearer token). The same API tokens and the same per-user access as the JSON API
(apps/tasks/doors/api.py), through the same services: a task started here is a normal Task, in the
user's chat like any other.

Tools: `list_workspaces`, `run_task {workspace, text, mode?}` (returns when the task ends or its
spec waits for review, with progress notifications meanwhile), `task_status {id}`,
`task_result {id}` (answer, outcome, changes summary), `review_spec {id, decision, feedback?}`.
Every tool authenticates the request's own `Authorization` header; a refusal is a tool error."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from asgiref.sync import sync_to_async
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from apps.tasks import selectors, services
from apps.tasks.conf import agent_config
from apps.tasks.models import FINAL_STATUSES
from apps.tasks.run import executors
from apps.tasks.services import ApplicationError

POLL_SECONDS = 0.5
WAITING = frozenset({"awaiting_review", "parked"})
SETTLE_SECONDS = 10.0  # review_spec: the run takes a decision up within this

server = MCPServer(
    "agentkit",
    instructions=(
        "agentkit runs complex tasks with LLM agents in a workspace: plan, review, phased "
        "execution, verification in a sandbox. list_workspaces, then run_task; a plan_exec "
        "task may stop at a spec awaiting review: review_spec confirms or rejects it."
    ),
)


def _user_of(headers: Any) -> Any:
    header = (headers or {}).get("authorization", "") if headers is not None else ""
    scheme, _, key = header.partition(" ")
    user = None
    if scheme.lower() == "bearer" and key.strip():
        user = services.api_token_authenticate(key=key.strip())
    if user is None:
        raise ToolError(
            "not authenticated: send 'Authorization: Bearer <token>' "
            "(manage.py create_api_token USER)"
        )
    return user


async def _user(ctx: Context) -> Any:
    return await sync_to_async(_user_of, thread_sensitive=False)(ctx.headers)


def _task_of(user, task_id: int):
    task = selectors.task_for_user(user=user, task_id=task_id)
    if task is None:  # unknown, or another user's: the same answer
        raise ToolError(f"task {task_id} not found")
    return task


def _status_of(task) -> dict[str, Any]:
    from apps.specs.selectors import spec_latest, spec_payload

    out: dict[str, Any] = {
        "id": task.pk,
        "status": task.status,
        "mode": task.mode,
        "workspace": task.workspace.name,
        "conversation": task.conversation_id,
        "last_seq": task.last_seq,
    }
    if task.status in WAITING:
        spec = spec_latest(task_id=task.pk)
        if spec is not None:
            payload = spec_payload(spec)
            out["spec"] = {
                "id": payload["id"],
                "status": payload["status"],
                "goal": payload["goal"],
                "spec": payload["spec"],
                "hint": "review_spec {id, decision: confirm | reject, feedback} decides it",
            }
    if isinstance(task.error, dict) and task.error.get("error_code"):
        out["error"] = {"code": task.error["error_code"], "message": task.error.get("message", "")}
    return out


def _result_of(task) -> dict[str, Any]:
    from apps.tasks.doors.api import task_payload
    from apps.tasks.workspaces import changes

    payload = task_payload(task)
    files = changes.changes_payload(task=task)
    outcome = payload.get("outcome")
    if outcome is None:
        outcome = task.status if task.status in FINAL_STATUSES else None
    return {
        **_status_of(task),
        "answer": task.result or "",
        "outcome": outcome,
        "changes": [
            {"path": f["path"], "created": f["created"], "edits": f["edits"], "state": f["state"]}
            for f in files
        ],
        "usage": payload.get("usage"),
    }


def _app_error(exc: ApplicationError) -> ToolError:
    code = exc.extra.get("error_code", "invalid_request")
    return ToolError(f"{code}: {exc.message}")


@server.tool()
async def list_workspaces(ctx: Context) -> dict[str, Any]:
    """The workspaces you belong to: {workspaces: [{id, name}]}."""
    user = await _user(ctx)

    def rows():
        return [{"id": w.pk, "name": w.name} for w in selectors.workspaces_for_user(user=user)]

    return {"workspaces": await sync_to_async(rows, thread_sensitive=False)()}


@server.tool()
async def run_task(
    workspace: str, text: str, ctx: Context, mode: str | None = None
) -> dict[str, Any]:
    """Run a task in a workspace (its id or name) and wait for its end. mode: react,
    plan_exec, team_collab or direct_chat (default: the server's). Returns the task's status,
    answer, outcome and changes; a spec awaiting review is returned with its id (review_spec)."""
    user = await _user(ctx)

    def create():
        found = selectors.workspace_for_user(user=user, ref=workspace)
        if found is None:
            raise ToolError(f"workspace {workspace!r} not found (list_workspaces lists yours)")
        try:
            task = services.task_create(
                user=user, workspace=found, text=text, mode=mode, config=agent_config()
            )
            executors.task_submit(task_id=task.pk)
        except ApplicationError as exc:
            raise _app_error(exc) from None
        return task.pk

    task_id = await sync_to_async(create)()
    return await _wait(ctx, user, task_id)


async def _wait(ctx: Context, user, task_id: int, settle: float = 0.0) -> dict[str, Any]:
    """Until the task ends or waits for a review (`settle`: seconds in which a review it still
    waits for is the one just decided, not a new one)."""
    started, last_seen = time.monotonic(), None
    while True:
        task = await sync_to_async(_task_of, thread_sensitive=False)(user, task_id)
        if task.status in FINAL_STATUSES:
            return await sync_to_async(_result_of, thread_sensitive=False)(task)
        if task.status in WAITING and time.monotonic() - started >= settle:
            return await sync_to_async(_status_of, thread_sensitive=False)(task)
        seen = (task.status, task.last_seq)
        if seen != last_seen:
            last_seen = seen
            await ctx.report_progress(
                progress=float(task.last_seq),
                message=f"task {task_id} {task.status}: {task.last_seq} events, "
                f"{time.monotonic() - started:.0f} s",
            )
        await asyncio.sleep(POLL_SECONDS)


@server.tool()
async def task_status(id: int, ctx: Context) -> dict[str, Any]:
    """A task's status (and the spec awaiting review, if any)."""
    user = await _user(ctx)
    task = await sync_to_async(_task_of, thread_sensitive=False)(user, id)
    return await sync_to_async(_status_of, thread_sensitive=False)(task)


@server.tool()
async def task_result(id: int, ctx: Context) -> dict[str, Any]:
    """A task's answer, outcome and a summary of the files it changed."""
    user = await _user(ctx)
    task = await sync_to_async(_task_of, thread_sensitive=False)(user, id)
    return await sync_to_async(_result_of, thread_sensitive=False)(task)


@server.tool()
async def review_spec(
    id: int, decision: str, ctx: Context, feedback: str = "", wait: bool = True
) -> dict[str, Any]:
    """Decide a spec awaiting review (id: the spec's id from run_task or task_status):
    decision confirm or reject (with feedback saying what to change). With wait (default),
    returns when the task ends or waits for review again, like run_task."""
    from apps.engine.plan.spec import spec_review_id
    from apps.specs import services as spec_services

    user = await _user(ctx)

    def reply() -> int:
        try:
            outcome = spec_services.spec_review_reply(
                user=user, review_id=spec_review_id(id), decision=decision, feedback=feedback
            )
        except ApplicationError as exc:
            raise _app_error(exc) from None
        if outcome.continue_task:
            executors.task_submit(task_id=outcome.spec.task_id)
        return outcome.spec.task_id

    task_id = await sync_to_async(reply)()
    if not wait:
        task = await sync_to_async(_task_of, thread_sensitive=False)(user, task_id)
        return await sync_to_async(_status_of, thread_sensitive=False)(task)
    return await _wait(ctx, user, task_id, settle=SETTLE_SECONDS)
