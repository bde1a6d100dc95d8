"""Batch runs (`python manage.py run_tasks FILE`): spec.py reads and checks the file,
services.py makes each task's workspace and Task, running.py runs them concurrently through the
chat's runner, outcomes.py reads what each came to, report.py writes the table, JSON and JUnit,
progress.py shows progress; reading.py reads the file with the line of every value."""
