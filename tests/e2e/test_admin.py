"""Admin as an operator uses it: a long task's page stays short and read-only; events are a
paginated, filtered list linking to the chat."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_login import log_in

pytestmark = pytest.mark.e2e

MAKE_TASK = """
from django.utils import timezone
from apps.tasks.models import Task, TaskEvent, Workspace
from django.contrib.auth import get_user_model
ws = Workspace.objects.get(name="demo")
user = get_user_model().objects.get(username="admin")
task = Task.objects.create(workspace=ws, user=user, mode="react", goal="a long task",
                           status="completed", usage={"input_tokens": 10}, cost=0.5)
now = timezone.now()
TaskEvent.objects.bulk_create([
    TaskEvent(task=task, seq=i, type="token" if i % 10 else "tool_call",
              data={"step": 1, "text": "word %d " % i, "name": "read_file"}, ts=now)
    for i in range(1, 201)
])
Task.objects.filter(pk=task.pk).update(last_seq=200)
print(task.pk)
"""


def test_a_200_event_task_page_is_short_and_nothing_on_it_can_falsify_history(
    page: Page, server, artifacts
):
    task_id = server.manage("shell", "-c", MAKE_TASK).stdout.strip().splitlines()[-1]
    log_in(page, server)
    page.goto(f"{server.url}/admin/tasks/task/{task_id}/change/")
    expect(page.locator("#content")).to_contain_text("a long task")
    height = page.evaluate("document.documentElement.scrollHeight")
    page.screenshot(path=str(artifacts / "admin-task-200-events.png"), full_page=True)
    assert height < 2000, height
    form = page.locator("#content-main")
    editable = form.locator(
        "input:not([type=hidden]):not([type=submit]), textarea, select, [contenteditable=true]"
    )
    assert editable.count() == 0
    expect(page.locator("input[name=_save]")).to_have_count(0)
    expect(page.locator(".readonly").first).to_be_visible()
    # Links: to the chat view and to the task's events.
    expect(page.get_by_role("link", name=f"open #{task_id} in the chat")).to_have_attribute(
        "href", f"/#task-{task_id}"
    )
    page.get_by_role("link", name="200 events").click()
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(100)  # paginated
    expect(page.locator(".paginator")).to_contain_text("2")
    page.get_by_role("link", name="tool_call").click()  # the type filter
    expect(rows).to_have_count(20)
    assert page.locator("#result_list input, #result_list textarea").count() == 0
    page.screenshot(path=str(artifacts / "admin-task-events.png"), full_page=True)


MORE_PEOPLE = """
from apps.tasks.models import Task, Workspace
from django.contrib.auth import get_user_model
bob = get_user_model().objects.create_user("bob", password="pw-123-secret")
ws = Workspace.objects.create(name="other", root_dir="/tmp/other")
ws.members.add(bob)
Task.objects.create(workspace=ws, user=bob, mode="direct_chat", goal="bob's question " * 20)
"""


def test_task_list_offers_cancel_and_delete_only_and_useful_filters(page: Page, server, artifacts):
    server.manage("shell", "-c", MORE_PEOPLE)
    log_in(page, server)
    page.goto(f"{server.url}/admin/tasks/task/")
    actions = page.locator("select[name=action] option")
    values = sorted(v for v in actions.evaluate_all("os => os.map(o => o.value)") if v)
    assert values == ["cancel_tasks", "delete_selected"]
    filters = page.locator("#changelist-filter")
    for title in ("status", "mode", "workspace", "user", "created at"):
        expect(filters).to_contain_text(f"By {title}")
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
    fits = "t => t.getBoundingClientRect().width <= t.closest('.results').clientWidth + 1"
    assert page.locator("#result_list").evaluate(fits)  # every column is on screen, no scrolling
    expect(page.get_by_role("link", name="Add task")).to_have_count(0)
    page.screenshot(path=str(artifacts / "admin-task-list.png"), full_page=True)


def test_the_task_page_names_the_model_tabulates_usage_and_the_index_links_the_dashboards(
    page: Page, server, artifacts
):
    task_id = server.manage("shell", "-c", MAKE_TASK).stdout.strip().splitlines()[-1]
    log_in(page, server)
    page.goto(f"{server.url}/admin/tasks/task/{task_id}/change/")
    expect(page.locator(".field-model_display .readonly")).to_have_text("main (scripted)")
    usage = page.locator(".field-usage_table table.usage-table")
    expect(usage.locator("tr", has_text="input tokens")).to_contain_text("10")
    expect(page.locator(".field-cost_display .readonly")).to_have_text("$0.5000")
    page.screenshot(path=str(artifacts / "admin-task-model-usage.png"), full_page=True)

    page.goto(f"{server.url}/admin/")
    dashboards = page.locator("#agentkit-dashboards")
    dashboards.get_by_role("link", name="Evolution dashboard").click()
    expect(page).to_have_url(re.compile(r"/admin/evolution/.+/dashboard/$"))
    page.go_back()
    dashboards.get_by_role("link", name="Chat dashboard").click()
    expect(page).to_have_url(f"{server.url}/dashboard/")
