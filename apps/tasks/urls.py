from django.urls import path

from apps.dashboard.views import evaluation_page, evaluations_page
from apps.tasks.doors import api, api_branches, api_workspaces, views

urlpatterns = [
    path("", views.chat_page, name="chat"),
    # The Evaluations pages (apps/dashboard) of the runs `run_tasks --suite` stores here.
    path("evaluations/", evaluations_page, name="evaluations"),
    path("evaluations/<int:run_id>/", evaluation_page, name="evaluation"),
    path("api/tasks", api.tasks, name="api-tasks"),
    path("api/tasks/<int:task_id>", api.task_detail, name="api-task"),
    path("api/tasks/<int:task_id>/events", api.task_events, name="api-task-events"),
    path("api/tasks/<int:task_id>/cancel", api.task_cancel, name="api-task-cancel"),
    path("api/tasks/<int:task_id>/changes", api.task_changes, name="api-task-changes"),
    path("api/tasks/<int:task_id>/revert", api.task_revert, name="api-task-revert"),
    path("api/tasks/<int:task_id>/retry", api.task_retry, name="api-task-retry"),
    path("api/tasks/<int:task_id>/resume", api.task_resume, name="api-task-resume"),
    # A repository task's branch (docs/repositories.md).
    path("api/tasks/<int:task_id>/patch", api_branches.task_patch, name="api-task-patch"),
    path("api/tasks/<int:task_id>/merge", api_branches.task_merge, name="api-task-merge"),
    path("api/tasks/<int:task_id>/push", api_branches.task_push, name="api-task-push"),
    path("api/tasks/<int:task_id>/discard", api_branches.task_discard, name="api-task-discard"),
    path("api/conversations", api.conversations, name="api-conversations"),
    path(
        "api/conversations/<int:conversation_id>",
        api.conversation_detail,
        name="api-conversation",
    ),
    path("api/workspaces", api_workspaces.workspaces, name="api-workspaces"),
    path("api/workspaces/upload", api_workspaces.workspace_upload, name="api-workspace-upload"),
    path(
        "api/workspaces/demo/reset",
        api_workspaces.workspace_reset_demo,
        name="api-workspace-reset-demo",
    ),
]
