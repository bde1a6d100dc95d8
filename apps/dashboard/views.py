"""The dashboard page: charts over the tasks of the signed-in user's workspaces; the
Evaluations pages: the `run_tasks --suite` runs that ran as that user."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.utils.safestring import mark_safe

from apps.dashboard import evaluations
from apps.dashboard.figures import dashboard_charts
from apps.dashboard.selectors import DEFAULT_PERIOD, PERIODS, dashboard_data, dashboard_tasks
from apps.tasks.selectors import workspaces_for_user


class DashboardFilters(forms.Form):
    """Query parameters; the workspace choices are the user's own, so another user's workspace
    id is refused like an unknown one."""

    workspace = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="All my workspaces"
    )
    days = forms.TypedChoiceField(
        label="Period",
        choices=[(n, f"last {n} days") for n in PERIODS],
        coerce=int,
        required=False,
        empty_value=DEFAULT_PERIOD,
    )

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["workspace"].queryset = workspaces_for_user(user=user)


@login_required
def dashboard_page(request):
    params = request.GET if request.GET else {"days": DEFAULT_PERIOD}
    filters = DashboardFilters(params, user=request.user)
    if not filters.is_valid():
        return render(
            request, "dashboard/dashboard.html", {"filters": filters, "charts": []}, status=400
        )
    tasks = dashboard_tasks(user=request.user, workspace=filters.cleaned_data["workspace"])
    data = dashboard_data(tasks=tasks, days=filters.cleaned_data["days"])
    # The SVG is built by apps/dashboard/charts.py, which escapes every label it writes.
    charts = [(chart, mark_safe(chart.svg)) for chart in dashboard_charts(data)]
    return render(
        request,
        "dashboard/dashboard.html",
        {"filters": filters, "charts": charts, "data": data},
    )


@login_required
def evaluations_page(request):
    return render(
        request,
        "dashboard/evaluations.html",
        {"runs": evaluations.evaluation_runs(user=request.user)},
    )


@login_required
def evaluation_page(request, run_id: int):
    run = evaluations.evaluation_run(user=request.user, pk=run_id)
    if run is None:  # another user's run reads like a missing one
        raise Http404("No such evaluation run of yours.")
    charts = [(chart, mark_safe(chart.svg)) for chart in evaluations.evaluation_charts(run)]
    return render(
        request,
        "dashboard/evaluation.html",
        {
            "run": run,
            "charts": charts,
            "summary": evaluations.summary_rows(run),
            "table": evaluations.evaluation_table(run),
        },
    )
