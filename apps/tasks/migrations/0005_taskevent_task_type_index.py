from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0004_task_retry_of_salvage"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="taskevent",
            index=models.Index(fields=["task", "type"], name="task_event_task_type"),
        ),
    ]
