from django.apps import AppConfig


class TasksConfig(AppConfig):
    name = "apps.tasks"
    label = "tasks"
    verbose_name = "Tasks and workspaces"

    def ready(self) -> None:
        from apps.tasks import checks  # noqa: F401  (registers the agentkit.yaml system check)
