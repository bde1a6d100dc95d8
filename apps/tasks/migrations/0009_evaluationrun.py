import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0008_run_liveness_workspace_lease"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="EvaluationRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("suite", models.CharField(max_length=40)),
                ("modes", models.JSONField(default=list)),
                ("model", models.CharField(blank=True, default="", max_length=200)),
                ("repeat", models.PositiveSmallIntegerField(default=1)),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField()),
                ("interrupted", models.BooleanField(default=False)),
                ("summary", models.JSONField(default=dict)),
                ("outcomes", models.JSONField(default=list)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="evaluation_runs",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-started_at", "-id"],
                "indexes": [
                    models.Index(fields=["user", "-started_at"], name="tasks_evalrun_user_started")
                ],
            },
        ),
    ]
