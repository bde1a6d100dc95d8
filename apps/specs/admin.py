"""Specs in the admin: read-mostly history of what was planned, reviewed and executed. Staff see
only the specs of workspaces they are members of (superusers see all); nothing is edited here —
decisions are given from the chat page or the API, where the review gate hears them."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from apps.specs.models import Checkpoint, Spec, SpecPhase, SpecReview
from apps.tasks.models import Workspace


def visible_workspaces(request):
    if request.user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(members=request.user)


class WorkspaceFilter(admin.SimpleListFilter):
    """Lists only the workspaces the admin may see (the default filter would list them all)."""

    title = "workspace"
    parameter_name = "workspace"
    lookup = "workspace_id"

    def lookups(self, request, model_admin):
        return [(str(w.pk), w.name) for w in visible_workspaces(request)]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.lookup: self.value()}) if self.value() else queryset


class SpecWorkspaceFilter(WorkspaceFilter):
    lookup = "spec__workspace_id"


class ReadOnlyAdmin(admin.ModelAdmin):
    workspace_lookup = "workspace__in"

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{self.workspace_lookup: visible_workspaces(request)})


class SpecPhaseInline(admin.TabularInline):
    model = SpecPhase
    extra = 0
    can_delete = False
    fields = ("position", "phase_id", "title", "role", "depends_on", "status")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class SpecReviewInline(admin.TabularInline):
    model = SpecReview
    extra = 0
    can_delete = False
    fields = ("review_id", "decision", "feedback", "user", "requested_at", "resolved_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Spec)
class SpecAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "task_link",
        "revision",
        "status",
        "workspace",
        "short_goal",
        "updated_at",
    )
    list_filter = ("status", WorkspaceFilter)
    search_fields = ("goal",)
    list_select_related = ("workspace", "task")
    fields = ("task_link", "workspace", "revision", "status", "goal", "draft", "feedback")
    readonly_fields = fields
    inlines = [SpecPhaseInline, SpecReviewInline]

    @admin.display(description="task")
    def task_link(self, obj: Spec) -> str:
        return format_html('<a href="/#task-{0}">task #{0}</a>', obj.task_id)

    @admin.display(description="goal")
    def short_goal(self, obj: Spec) -> str:
        return obj.goal[:80]


@admin.register(SpecReview)
class SpecReviewAdmin(ReadOnlyAdmin):
    workspace_lookup = "spec__workspace__in"
    list_display = ("review_id", "decision", "user", "requested_at", "resolved_at")
    list_filter = ("decision", SpecWorkspaceFilter)
    list_select_related = ("spec", "user")
    fields = ("review_id", "spec", "decision", "feedback", "user", "requested_at", "resolved_at")
    readonly_fields = fields


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    """Checkpoints (apps/specs/checkpoints.py): what a resumed task does not run again."""

    workspace_lookup = "spec__workspace__in"
    list_display = ("id", "task_id", "spec", "phase_id", "status", "snapshot_ref", "created_at")
    list_filter = ("status", SpecWorkspaceFilter)
    list_select_related = ("spec",)
    search_fields = ("phase_id",)
    fields = ("spec", "task", "phase_id", "status", "counters", "snapshot_ref", "created_at")
    readonly_fields = fields
