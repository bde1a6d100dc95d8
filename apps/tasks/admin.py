from django.contrib import admin

from apps.tasks.models import Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("name", "root_dir", "share_evolution", "updated_at")
    search_fields = ("name", "root_dir")
    filter_horizontal = ("members",)
