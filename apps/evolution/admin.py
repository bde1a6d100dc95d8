"""Curation of what evolution learned. Staff see only the artifacts of workspaces they are
members of (superusers see all); actor fields and provenance are read-only; text edits are
validated like the agent's own (Pitfall.clean, PromptVersion.clean)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from apps.dashboard.figures import evolution_charts
from apps.dashboard.selectors import injections_by_day, period_days
from apps.evolution.models import (
    EvolutionCounter,
    Lesson,
    Pitfall,
    PitfallInjection,
    PromptStatus,
    PromptVersion,
)
from apps.evolution.selectors import evolution_dashboard
from apps.evolution.services.curation import (
    PITFALL_ACTIONS,
    pitfall_set_status,
    pitfall_share,
    prompt_version_set_status,
)
from apps.evolution.services.prompts import prompt_ab_figures
from apps.tasks.models import Task, Workspace
from apps.tasks.services import ApplicationError


def visible_workspaces(request):
    if request.user.is_superuser:
        return Workspace.objects.all()
    return Workspace.objects.filter(members=request.user)


class WorkspaceFilter(admin.SimpleListFilter):
    """Lists only the workspaces the admin may see (the default filter would list them all)."""

    title = "workspace"
    parameter_name = "workspace"

    def lookups(self, request, model_admin):
        return [(str(w.pk), w.name) for w in visible_workspaces(request)]

    def queryset(self, request, queryset):
        return queryset.filter(workspace_id=self.value()) if self.value() else queryset


class WorkspaceScopedAdmin(admin.ModelAdmin):
    provenance: tuple[str, ...] = ("actor", "actor_name", "created_at")

    def get_queryset(self, request):
        queryset = super().get_queryset(request).select_related("workspace")
        if request.user.is_superuser:
            return queryset
        return queryset.filter(workspace__in=visible_workspaces(request))

    def get_readonly_fields(self, request, obj=None):
        # the workspace of an existing artifact never moves; actors are never edited
        return (*self.provenance, *(("workspace",) if obj is not None else ()))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "workspace":
            kwargs["queryset"] = visible_workspaces(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def _apply(self, request, queryset, change, done: str) -> None:
        count = 0
        for obj in queryset:
            try:
                change(obj)
                count += 1
            except ApplicationError as exc:
                self.message_user(request, exc.message, messages.ERROR)
        if count:
            self.message_user(request, f"{done}: {count}.")


@admin.register(Pitfall)
class PitfallAdmin(WorkspaceScopedAdmin):
    list_display = (
        "trigger",
        "workspace",
        "category",
        "severity",
        "status",
        "confidence",
        "occurrences",
        "hit_count",
        "shared",
        "actor",
        "updated_at",
    )
    list_filter = (WorkspaceFilter, "actor", "status", "severity", "category", "shared")
    search_fields = ("trigger", "advice")
    provenance = (
        "actor",
        "actor_name",
        "source_tasks",
        "occurrences",
        "hit_count",
        "shared",
        "created_at",
        "updated_at",
        "last_seen_at",
    )
    actions = ["approve", "reject", "retire", "activate", "share"]

    def get_urls(self):
        dashboard = self.admin_site.admin_view(self.dashboard_view)
        return [
            path("dashboard/", dashboard, name="evolution_dashboard"),
            *super().get_urls(),
        ]

    def dashboard_view(self, request):
        """Pitfalls over time, top pitfalls, hit counts, outcomes after injection."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        workspaces = visible_workspaces(request)
        dashboard = evolution_dashboard(workspaces=workspaces)
        days = period_days(30)
        injections = injections_by_day(
            tasks=Task.objects.filter(workspace__in=workspaces), days=days
        )
        charts = evolution_charts(by_day=dashboard.by_day, injections=injections, days=days)
        context = {
            **self.admin_site.each_context(request),
            "title": "Evolution dashboard",
            "workspaces": workspaces,
            "dashboard": dashboard,
            # SVG from apps/dashboard/charts.py, which escapes every label it writes
            "charts": {name: mark_safe(svg) for name, svg in charts.items()},
        }
        return TemplateResponse(request, "evolution/dashboard.html", context)

    def _status_action(self, request, queryset, name):
        self._apply(
            request,
            queryset,
            lambda p: pitfall_set_status(pitfall=p, status=PITFALL_ACTIONS[name]),
            f"{name.capitalize()}d pitfalls" if name.endswith("e") else f"{name}ed pitfalls",
        )

    @admin.action(description="Approve selected pitfalls (active)")
    def approve(self, request, queryset):
        self._status_action(request, queryset, "approve")

    @admin.action(description="Reject selected pitfalls (retired)")
    def reject(self, request, queryset):
        self._status_action(request, queryset, "reject")

    @admin.action(description="Retire selected pitfalls")
    def retire(self, request, queryset):
        self._status_action(request, queryset, "retire")

    @admin.action(description="Activate selected pitfalls")
    def activate(self, request, queryset):
        self._status_action(request, queryset, "activate")

    @admin.action(description="Share selected pitfalls with opted-in workspaces")
    def share(self, request, queryset):
        self._apply(request, queryset, lambda p: pitfall_share(pitfall=p), "Shared pitfalls")


@admin.register(PromptVersion)
class PromptVersionAdmin(WorkspaceScopedAdmin):
    list_display = ("__str__", "workspace", "status", "finished_runs", "actor", "created_at")
    list_filter = (WorkspaceFilter, "actor", "status", "target_kind")
    search_fields = ("text", "target_name")
    provenance = (
        "actor",
        "actor_name",
        "evidence_pitfalls",
        "ab_comparison",
        "created_at",
        "updated_at",
    )

    @admin.display(description="finished runs")
    def finished_runs(self, obj):
        return obj.runs.exclude(outcome="").count()

    @admin.display(description="A/B: this version vs the active one (finished runs)")
    def ab_comparison(self, obj):
        if obj.pk is None:
            return "-"
        header = (
            "<tr><th>version</th><th>status</th><th>runs (n)</th><th>completed</th>"
            "<th>verification passed / checked</th><th>mean reflections</th>"
            "<th>mean tokens</th></tr>"
        )
        rows = format_html_join(
            "",
            "<tr><td>#{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td>"
            "<td>{}</td></tr>",
            (
                (
                    f.version_id,
                    f.status,
                    f.runs,
                    f.completed,
                    f.verification_passed,
                    f.verification_runs,
                    f.mean_reflections,
                    f.mean_tokens,
                )
                for f in prompt_ab_figures(version=obj)
            ),
        )
        return format_html("<table class='ab'>{}{}</table>", mark_safe(header), rows)

    actions = ["approve", "reject", "activate"]

    def _status_action(self, request, queryset, status, done):
        self._apply(
            request,
            queryset,
            lambda v: prompt_version_set_status(version=v, status=status),
            done,
        )

    @admin.action(description="Approve selected prompt versions")
    def approve(self, request, queryset):
        self._status_action(request, queryset, PromptStatus.APPROVED, "Approved prompt versions")

    @admin.action(description="Reject selected prompt versions")
    def reject(self, request, queryset):
        self._status_action(request, queryset, PromptStatus.REJECTED, "Rejected prompt versions")

    @admin.action(description="Activate selected (approved) prompt versions")
    def activate(self, request, queryset):
        self._status_action(request, queryset, PromptStatus.ACTIVE, "Activated prompt versions")


@admin.register(Lesson)
class LessonAdmin(WorkspaceScopedAdmin):
    list_display = ("text", "workspace", "task", "outcome", "category", "actor", "created_at")
    list_filter = (WorkspaceFilter, "actor", "outcome", "category")
    search_fields = ("text",)
    provenance = (
        "actor",
        "actor_name",
        "task",
        "outcome",
        "category",
        "text",
        "evidence",
        "pitfall",
        "created_at",
    )

    def has_add_permission(self, request):
        return False  # lessons come from tasks


@admin.register(PitfallInjection)
class PitfallInjectionAdmin(admin.ModelAdmin):
    list_display = ("pitfall", "task", "outcome", "created_at")
    list_filter = ("outcome",)
    readonly_fields = ("pitfall", "task", "outcome", "created_at")

    def get_queryset(self, request):
        queryset = super().get_queryset(request).select_related("pitfall", "task")
        if request.user.is_superuser:
            return queryset
        return queryset.filter(task__workspace__in=visible_workspaces(request))

    def has_add_permission(self, request):
        return False


@admin.register(EvolutionCounter)
class EvolutionCounterAdmin(admin.ModelAdmin):
    list_display = ("name", "value", "updated_at")
    readonly_fields = ("name", "value", "updated_at")

    def has_add_permission(self, request):
        return False
