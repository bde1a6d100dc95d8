"""The workspaces of the JSON API: `GET /api/workspaces` (those the user belongs to),
`POST /api/workspaces` {"name", "directory"} (a directory under `workspaces.allowed_roots`; a
git work tree there is a repository workspace) or {"name", "git_url", "branch"?} (a clone:
docs/repositories.md), `POST /api/workspaces/upload`, `POST /api/workspaces/demo/reset`."""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

from apps.tasks import selectors
from apps.tasks.conf import agent_config
from apps.tasks.doors.api import _json_body, api_view
from apps.tasks.services import ApplicationError
from apps.tasks.workspaces import workspaces as workspace_services


@api_view(("GET", "POST"))
def workspaces(request):
    if request.method == "POST":  # {"name", "directory"}: a directory under allowed_roots
        body = _json_body(request)
        if body.get("git_url") is not None:  # {"name", "git_url", "branch"?}: a clone
            ws = workspace_services.workspace_create_from_git(
                user=request.user,
                name=body.get("name"),
                git_url=body.get("git_url"),
                branch=body.get("branch"),
                config=agent_config(),
                workspaces_dir=settings.AGENTKIT_WORKSPACES_DIR,
            )
            return JsonResponse(workspace_payload(ws), status=201)
        ws = workspace_services.workspace_create_from_directory(
            user=request.user,
            name=body.get("name"),
            directory=body.get("directory"),
            config=agent_config(),
        )
        return JsonResponse(workspace_payload(ws), status=201)
    return JsonResponse(
        {
            "workspaces": [
                workspace_payload(ws) for ws in selectors.workspaces_for_user(user=request.user)
            ]
        }
    )


def workspace_payload(ws) -> dict:
    """{"id", "name"}, and for a repository workspace its `base_branch` (and `git_url`)."""
    payload = {"id": ws.pk, "name": ws.name}
    if ws.base_branch:
        payload |= {"repository": True, "base_branch": ws.base_branch, "git_url": ws.git_url}
    return payload


@api_view(("POST",))
def workspace_upload(request):
    """multipart/form-data: name, archive (.zip or .tar.gz)."""
    archive = request.FILES.get("archive")
    if archive is None:
        raise ApplicationError(
            "attach the archive as the form field 'archive'", {"error_code": "missing_field"}
        )
    ws = workspace_services.workspace_create_from_archive(
        user=request.user,
        name=request.POST.get("name"),
        filename=archive.name or "",
        size=archive.size or 0,
        chunks=archive.chunks(),
        config=agent_config(),
        workspaces_dir=settings.AGENTKIT_WORKSPACES_DIR,
    )
    return JsonResponse({"id": ws.pk, "name": ws.name}, status=201)


@api_view(("POST",))
def workspace_reset_demo(request):
    ws = workspace_services.workspace_reset_demo(
        user=request.user,
        demo_source=settings.AGENTKIT_DEMO_SOURCE,
        workspaces_dir=settings.AGENTKIT_WORKSPACES_DIR,
    )
    return JsonResponse({"id": ws.pk, "name": ws.name, "reset": True})
