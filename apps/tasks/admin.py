"""Admin: workspaces and tokens are managed here; tasks and their events are history, shown
read-only. The only task actions are the safe ones (cancel, delete); events are a paginated,
type-filtered list that links to the task's chat view."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from apps.tasks import selectors
from apps.tasks.models import ApiToken, Task, TaskEvent, Workspace
from apps.tasks.selectors import task_model_label, usage_rows
from apps.tasks.services import api_token_revoke, task_request_cancel

# The app list sidebar squeezes the task and event lists; the breadcrumbs and home page remain.
admin.site.enable_nav_sidebar = False


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "root_dir", "base_branch", "share_evolution", "updated_at")
    search_fields = ("name", "root_dir")
    filter_horizontal = ("members",)


class ReadOnlyAdmin(admin.ModelAdmin):
    """Nothing stored can be edited: history stays what happened."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def chat_link(task_id: int) -> str:
    return format_html('<a href="/#task-{0}">open #{0} in the chat</a>', task_id)


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "short_goal",
        "status",
        "mode",
        "workspace",
        "user",
        "cost_display",
        "created_at",
    )
    list_display_links = ("id", "short_goal")
    list_filter = ("status", "outcome", "mode", "workspace", "user", "created_at")
    date_hierarchy = "created_at"
    search_fields = ("goal", "branch", "commit")
    list_select_related = ("workspace", "user")
    list_per_page = 50
    actions = ["cancel_tasks", "delete_selected"]
    fields = (
        "chat",
        "events_link",
        "status",
        "outcome_display",
        "mode",
        "skill",
        "model_display",
        "workspace",
        "user",
        "conversation",
        "branch",
        "commit",
        "base_commit",
        "worktree",
        "goal",
        "result",
        "error",
        "salvage",  # original_error stays with the task's owner (chat page, API)
        "retry_of",
        "usage_table",
        "cost_display",
        "last_seq",
        "cancel_requested_at",
        "created_at",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser or request.user.has_perm("tasks.delete_task")

    def has_view_permission(self, request, obj=None):
        return request.user.is_staff

    def get_deleted_objects(self, objs, request):
        """A task's events go with it (they cannot be deleted one by one)."""
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        perms_needed.discard(TaskEvent._meta.verbose_name)
        return deleted, model_count, perms_needed, protected

    @admin.display(description="goal")
    def short_goal(self, task):
        return Truncator(task.goal.splitlines()[0] if task.goal else "").chars(60)

    @admin.display(description="outcome", ordering="outcome")
    def outcome_display(self, task):
        """verified / changed files without running a check / finished without changing
        anything / the failure's error code (selectors.task_outcome)."""
        return selectors.outcome_words(selectors.task_outcome(task)) or "—"

    @admin.display(description="cost", ordering="cost")
    def cost_display(self, task):
        return f"${task.cost:.4f}"

    @admin.display(description="chat")
    def chat(self, task):
        return chat_link(task.pk)

    @admin.display(description="model")
    def model_display(self, task):
        """The model alias the run used (its task_started event), with its provider, as the
        chat's header shows it."""
        return task_model_label(task=task)

    @admin.display(description="usage")
    def usage_table(self, task):
        rows = usage_rows(task.usage)
        if not rows:
            return "-"
        return format_html(
            '<table class="usage-table"><tbody>{}</tbody></table>',
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows),
        )

    @admin.display(description="events")
    def events_link(self, task):
        url = reverse("admin:tasks_taskevent_changelist") + f"?task__id__exact={task.pk}"
        return format_html('<a href="{}">{} events</a>', url, task.last_seq)

    @admin.action(description="Cancel selected tasks (running or queued)")
    def cancel_tasks(self, request, queryset):
        asked = sum(task_request_cancel(task=task) for task in queryset)
        self.message_user(request, f"Asked {asked} task(s) to stop.", messages.SUCCESS)


@admin.register(TaskEvent)
class TaskEventAdmin(ReadOnlyAdmin):
    list_display = ("task_id", "seq", "type", "ts", "summary", "chat")
    list_display_links = None
    list_filter = ("type",)
    search_fields = ("=task__id",)
    list_per_page = 100
    show_full_result_count = False
    ordering = ("task", "seq")

    def has_delete_permission(self, request, obj=None):
        return False

    def has_view_permission(self, request, obj=None):
        return request.user.is_staff

    def get_actions(self, request):
        return {}

    @admin.display(description="data")
    def summary(self, event):
        data = event.data or {}
        text = data.get("text") or data.get("name") or data.get("status") or ""
        if event.type == "error":
            text = (data.get("error_struct") or {}).get("message", "")
        return Truncator(str(text)).chars(80)

    @admin.display(description="chat")
    def chat(self, event):
        return chat_link(event.task_id)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("prefix", "user", "name", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # tokens are created with `manage.py create_api_token USER` (shown once)

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        for token in queryset:
            api_token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).")
