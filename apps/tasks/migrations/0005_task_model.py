from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0004_task_retry_of_salvage"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="model",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
    ]
