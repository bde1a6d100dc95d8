"""A task on a repository workspace in the chat (issue 39): its Changes panel shows its branch,
its commits and the hand-off buttons; Merge updates the base branch; a merge the base moved
under is refused and the panel says why, naming the file. Real Daphne, real git, Chromium."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import agentkit_server
from tests.tasks.repos.support import NOTES, SCRIPT, git, make_remote

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def repo_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("branches")
    remote = make_remote(tmp)
    checkout = tmp / "checkout"
    git(tmp, "clone", "-q", str(remote), str(checkout))
    script = tmp / "script.yaml"
    script.write_text(SCRIPT)
    config = tmp / "agentkit.yaml"
    config.write_text(
        json.dumps(
            {
                "models": {"main": {"provider": "scripted", "script": str(script)}},
                "workspaces": {"allowed_roots": [str(tmp)]},
                "sandbox": {"mode": "off"},
            }
        )
    )
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        server.checkout, server.remote = checkout, remote
        yield server


def _register(page: Page, server) -> None:
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    made = page.request.post(
        f"{server.url}/api/workspaces",
        data=json.dumps({"name": "repo", "directory": str(server.checkout)}),
        headers={"Content-Type": "application/json", "X-CSRFToken": csrf},
    )
    assert made.status == 201, made.text()
    page.reload()


def _run(page: Page, text: str):
    page.locator("#workspace").select_option(label="repo")
    page.locator("#message").fill(f"@react {text}")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").filter(has_text=text).first
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    task.locator("[data-role=changes]").click()
    return task


def test_the_branch_its_commits_and_the_hand_offs_merge_and_a_refused_merge(
    page: Page, repo_server, artifacts
):
    log_in(page, repo_server)
    expect(page.locator("#workspace")).to_contain_text("demo")
    _register(page, repo_server)
    page.on("dialog", lambda dialog: dialog.accept())

    task = _run(page, "add ALPHA")
    task_id = task.get_attribute("data-task-id")
    expect(task.locator("[data-role=branch]").first).to_contain_text(
        f"agentkit/{task_id}-add-alpha @ "
    )
    box = task.locator("[data-role=branch]")
    expect(box.locator("[data-role=branch-name]")).to_have_text(f"agentkit/{task_id}-add-alpha")
    expect(box.locator("[data-role=branch-commits] li")).to_have_count(1)
    expect(box.locator("[data-role=branch-commits]")).to_contain_text("add ALPHA")
    expect(box.locator("[data-role=branch-files]")).to_contain_text("alpha.py")
    expect(box.locator("[data-role=branch-stat]")).to_have_text("1 file · +1 −0")
    for role in ("download-patch", "handoff-merge", "handoff-push", "handoff-discard"):
        expect(box.locator(f"[data-role={role}]")).to_be_visible()
    page.screenshot(path=str(artifacts / "chat-branch-handoffs.png"), full_page=True)
    box.locator("[data-role=handoff-merge]").click()
    expect(task.locator("[data-role=handoff-status]")).to_contain_text("Merged into main")
    assert (repo_server.checkout / "alpha.py").read_text() == "ALPHA = 1\n"
    assert git(repo_server.checkout, "log", "-1", "--format=%s", "main") == "add ALPHA"

    # A second task edits the notes; meanwhile someone changes the same line on main.
    task = _run(page, "reword the NOTES")
    (repo_server.checkout / "notes.txt").write_text(NOTES.replace("line two", "line two, by hand"))
    git(repo_server.checkout, "commit", "-q", "-am", "a human edits the notes")
    before = git(repo_server.checkout, "rev-parse", "main")
    task.locator("[data-role=handoff-merge]").click()
    refused = task.locator("[data-role=handoff-refused]")
    expect(refused).to_contain_text("conflicts in notes.txt")
    expect(refused).to_have_attribute("data-code", "merge_conflict")
    expect(task.locator("[data-role=conflict-files] li")).to_have_text(["notes.txt"])
    assert git(repo_server.checkout, "rev-parse", "main") == before
    page.screenshot(path=str(artifacts / "chat-branch-merge-refused.png"), full_page=True)


def test_a_repository_is_cloned_from_the_workspaces_panel(page: Page, repo_server):
    log_in(page, repo_server)
    page.locator("summary", has_text="Workspaces").click()
    form = page.locator("#ws-clone")
    form.get_by_label("Name").fill("cloned")
    form.get_by_label("URL").fill(f"file://{repo_server.remote}")
    form.get_by_role("button", name="Clone").click()
    expect(page.locator("#ws-status")).to_contain_text("Base branch: main.")
    expect(page.locator("#workspace option:checked")).to_have_text("cloned")
    form.get_by_label("Name").fill("nope")
    form.get_by_label("URL").fill("git://example.org/r.git")
    form.get_by_role("button", name="Clone").click()
    expect(page.locator("#ws-status")).to_contain_text("must be an https://")
