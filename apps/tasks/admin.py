from django.contrib import admin

from apps.tasks.models import ApiToken, Task, TaskEvent, Workspace
from apps.tasks.services import api_token_revoke


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "root_dir", "share_evolution", "updated_at")
    search_fields = ("name", "root_dir")
    filter_horizontal = ("members",)


class TaskEventInline(admin.TabularInline):
    model = TaskEvent
    extra = 0
    can_delete = False
    fields = ("seq", "type", "ts", "data")
    readonly_fields = fields
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("id", "goal", "workspace", "user", "mode", "status", "cost", "created_at")
    list_filter = ("status", "mode", "workspace")
    search_fields = ("goal",)
    readonly_fields = ("last_seq", "usage", "cost", "created_at", "started_at", "finished_at")
    inlines = [TaskEventInline]


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
