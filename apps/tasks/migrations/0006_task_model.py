from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks", "0005_taskevent_task_type_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="task",
            name="model",
            field=models.CharField(blank=True, default="", max_length=100),
        ),
    ]
