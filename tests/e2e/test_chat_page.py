"""The chat page as a product: Markdown that cannot run the model's HTML, the changes panel and
Revert on the demo fix, a rejected message kept in the box, the layout from 360 px to 1440 px,
the task header and Stop, history search and delete."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e

MARKDOWN_ANSWER = """Here is **the plan**:

1. read `slugify`
2. fix the regex

```python
def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower())
```

<script>window.__pwned = "script"</script>
<img src="x" onerror="window.__pwned = 'img'">
[click me](javascript:window.__pwned='link')
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The shipped config; the demo script plus one turn answering 'markdown' with Markdown,
    a code block and hostile HTML."""
    tmp = tmp_path_factory.mktemp("chatpage")
    demo = yaml.safe_load((ROOT / "apps/engine/llm/scripts/demo.yaml").read_text())
    demo["turns"].insert(0, {"match": "(?i)markdown", "repeat": True, "text": MARKDOWN_ANSWER})
    (tmp / "script.yaml").write_text(yaml.safe_dump(demo))
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    config.write_text(
        shipped.replace("chunk_delay_ms: 25", "chunk_delay_ms: 40\n    script: script.yaml")
    )
    assert "script: script.yaml" in config.read_text()
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as running:
        yield running


def send(page: Page, text: str, mode: str | None = None, new: bool = True):
    """Send `text`, in a new conversation unless `new` is False (a follow-up in the thread)."""
    if new:
        page.wait_for_function("() => window.agentkitChat && window.agentkitChat.openTask")
        page.get_by_role("button", name="New conversation").click()
    if mode:
        page.locator("#mode").select_option(mode)
    page.locator("#message").fill(text)
    page.get_by_role("button", name="Send").click()


def no_horizontal_overflow(page: Page) -> bool:
    return page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")


def composer_visible(page: Page) -> bool:
    box = page.locator("#composer").bounding_box()
    height = page.evaluate("window.innerHeight")
    width = page.evaluate("window.innerWidth")
    return (
        box is not None
        and box["y"] >= 0
        and box["y"] + box["height"] <= height + 1
        and box["x"] + box["width"] <= width + 1
    )


def test_answers_render_as_markdown_and_model_html_never_runs(page: Page, server, artifacts):
    log_in(page, server)
    send(page, "show me some markdown", mode="direct_chat")
    task = page.locator("article.task").last
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    answer = task.locator(".bubble.assistant").last
    expect(answer.locator("strong")).to_have_text("the plan")
    expect(answer.locator("ol > li")).to_have_count(2)
    expect(answer.locator("li code")).to_have_text("slugify")
    code = answer.locator("pre code")
    expect(code).to_contain_text('re.sub(r"[^a-z0-9]+"')
    expect(code).to_have_class(re.compile(r"\bhljs\b.*|.*\blanguage-python\b.*"))
    expect(code).to_have_attribute("data-highlighted", "yes")
    expect(code.locator(".hljs-keyword").first).to_be_visible()  # highlighted
    # The model's HTML shows as text; nothing of it runs or becomes an element.
    expect(answer).to_contain_text('<script>window.__pwned = "script"</script>')
    assert answer.locator("script, img, [onerror]").count() == 0
    hrefs = answer.evaluate("b => [...b.querySelectorAll('a')].map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.strip().lower().startswith("javascript")]
    expect(answer).to_contain_text("click me")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    # The header: model alias (provider), steps, elapsed time, tokens and cost.
    meta = task.locator("[data-role=meta]")
    expect(meta).to_contain_text("main (scripted)")
    expect(meta).to_contain_text("step 1")
    expect(meta).to_contain_text("tokens")
    expect(meta).to_contain_text("cache")
    expect(meta).to_contain_text("$")
    page.screenshot(path=str(artifacts / "chat-markdown.png"), full_page=True)


def test_changes_panel_shows_the_demo_fix_and_revert_restores_the_file(
    page: Page, server, artifacts
):
    slug = Path(server.env["AGENTKIT_VAR_DIR"]) / "workspaces" / "demo" / "textkit" / "slug.py"
    assert 'r"[^a-zA-Z0-9]"' in slug.read_text()
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, server)
    send(page, "fix the failing test in tests/test_slug.py", mode="react")
    task = page.locator("article.task").last
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    task = page.locator(f'article.task[data-task-id="{task.get_attribute("data-task-id")}"]')
    assert 'r"[^a-zA-Z0-9]+"' in slug.read_text()
    task.get_by_role("button", name="Changes").click()
    panel = task.locator(".changes-panel")
    file = panel.locator('.change-file[data-path="textkit/slug.py"]')
    expect(file).to_be_visible()
    expect(file.locator("[data-role=change-state]")).to_have_text("changed by this task")
    expect(file.locator(".diff-sbs td.del")).to_contain_text('r"[^a-zA-Z0-9]"')  # side by side
    expect(file.locator(".diff-sbs td.add")).to_contain_text('r"[^a-zA-Z0-9]+"')
    page.screenshot(path=str(artifacts / "chat-changes-panel.png"), full_page=False)

    dialogs = []
    page.once("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    file.get_by_role("button", name="Revert textkit/slug.py").click()
    expect(panel.locator("[data-role=change-state]")).to_have_text("reverted")
    assert dialogs and "Revert textkit/slug.py" in dialogs[0]
    assert (
        'r"[^a-zA-Z0-9]"' in slug.read_text()
        and "+" not in slug.read_text().split("re.sub(")[1][:20]
    )
    expect(panel.locator("[data-role=revert-status]")).to_contain_text("Reverted: textkit/slug.py")
    # The panel says what is left, not the old count.
    expect(panel.locator("[data-role=changes-summary]")).to_have_text(
        "Nothing left: every change of this task is reverted"
    )
    page.screenshot(path=str(artifacts / "chat-changes-reverted.png"), full_page=False)

    # A later task makes the identical edit: the earlier task does not claim it, and its
    # Revert names the later task instead of offering to undo it.
    send(page, "fix the failing test in tests/test_slug.py", mode="react", new=False)
    expect(page.locator("article.task")).to_have_count(2)  # a turn of the thread
    later = page.locator("article.task").last
    expect(later.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    later_id = later.get_attribute("data-task-id")
    assert 'r"[^a-zA-Z0-9]+"' in slug.read_text()
    task.get_by_role("button", name="Changes").click()  # close, then open afresh
    task.get_by_role("button", name="Changes").click()
    expect(file.locator("[data-role=change-state]")).to_have_text("changed by a later task")
    expect(file.locator("[data-role=change-note]")).to_contain_text(f"task #{later_id}")
    expect(file.get_by_role("button", name="Revert textkit/slug.py")).to_have_count(0)
    refused = page.evaluate(
        f"""fetch('/api/tasks/{task.get_attribute("data-task-id")}/revert', {{method: 'POST',
        headers: {{'Content-Type': 'application/json', 'X-CSRFToken': window.agentkitCsrf()}},
        body: JSON.stringify({{path: 'textkit/slug.py'}})}}).then(r => r.json())"""
    )
    assert f"task #{later_id}" in refused["error"]["message"]
    page.evaluate(  # leave the demo file as the other tests expect it
        f"""fetch('/api/tasks/{later_id}/revert', {{method: 'POST', headers: {{'Content-Type':
        'application/json', 'X-CSRFToken': window.agentkitCsrf()}}, body: '{{}}'}})"""
    )


def test_a_rejected_message_stays_in_the_box_with_the_reason(page: Page, server, artifacts):
    log_in(page, server)
    limit = int(page.locator("#composer").get_attribute("data-max-chars"))
    expect(page.locator("#composer-limit")).to_contain_text(f"Up to {limit} characters")
    send_button = page.get_by_role("button", name="Send")
    expect(send_button).to_be_disabled()  # empty input
    # Over the limit: Send is off and the box says why; nothing is sent or lost.
    too_long = "x" * (limit + 1)
    page.locator("#message").fill(too_long)
    expect(send_button).to_be_disabled()
    expect(page.locator("#composer-error")).to_contain_text(f"at most {limit}")
    # A page whose limit is out of date (raised by hand here): the server rejects the message,
    # and it comes back into the box with the server's reason.
    page.evaluate("document.querySelector('#composer').dataset.maxChars = String(10 ** 7)")
    page.locator("#message").fill(too_long + " please")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#composer-error")).to_contain_text("message_too_long")
    expect(page.locator("#message")).to_have_value(too_long + " please")
    # A bad frame (a workspace that is not the user's): kept too.
    page.evaluate(
        "document.querySelector('#workspace').add(new Option('gone', '999999'));"
        "document.querySelector('#workspace').value = '999999'"
    )
    page.locator("#message").fill("fix it please")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#composer-error")).to_contain_text("workspace not found")
    expect(page.locator("#message")).to_have_value("fix it please")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()  # it can be sent again
    page.screenshot(path=str(artifacts / "chat-rejected-message.png"))
    # Not connected: kept, with the reason.
    page.route("**/ws/chat/**", lambda route: route.abort())
    page.evaluate("window.agentkitSocket.drop()")
    page.locator("#message").fill("while offline")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#composer-error")).to_contain_text("Not connected")
    expect(page.locator("#message")).to_have_value("while offline")


@pytest.mark.parametrize("width", [360, 1440])
def test_layout_fits_the_screen_and_keeps_the_composer_visible(
    page: Page, server, artifacts, width
):
    page.set_viewport_size({"width": width, "height": 760})
    log_in(page, server)
    send(page, "show me some markdown " + "with-a-very-long-unbroken-word" * 8, mode="direct_chat")
    task = page.locator("article.task")
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    newest = task.get_attribute("data-task-id")
    page.goto(f"{server.url}/")  # no #task-N: the page opens on the most recent task
    expect(task).to_have_attribute("data-task-id", newest)
    expect(task.locator(".bubble.assistant pre code")).to_be_visible()
    page.locator("#message").fill("a " * 400)
    assert no_horizontal_overflow(page)
    assert composer_visible(page)
    messages = page.locator("#messages")
    assert messages.evaluate("m => getComputedStyle(m).overflowY") == "auto"
    page.screenshot(path=str(artifacts / f"chat-{width}px.png"))
    if width == 360:
        page.get_by_role("button", name="☰ Chats").click()
        expect(page.locator("#task-search")).to_be_focused()
        page.wait_for_timeout(300)  # the drawer's slide-in
        assert no_horizontal_overflow(page)
        page.screenshot(path=str(artifacts / "chat-360px-history.png"))


def test_stop_cancels_a_running_task_and_it_says_so(page: Page, server):
    log_in(page, server)
    send(page, "fix the failing test in tests/test_slug.py", mode="react")
    task = page.locator("article.task").last
    expect(task.locator("[data-role=status]")).to_have_text("running")
    task.get_by_role("button", name="Stop").click()
    expect(task.locator("[data-role=status]")).to_have_text("cancelled")
    expect(task.locator(".bubble.notice")).to_have_text("Cancelled by the user.")
    expect(task.get_by_role("button", name="Stop")).to_be_hidden()


def test_history_search_open_and_delete(page: Page, server, artifacts):
    log_in(page, server)
    send(page, "@chat a note about zebras", mode="direct_chat")
    expect(page.locator("article.task").last.locator("[data-role=status]")).to_have_text(
        "completed", timeout=TASK_MS
    )
    task_id = page.locator("article.task").last.get_attribute("data-task-id")
    task = page.locator(f'article.task[data-task-id="{task_id}"]')
    history = page.locator("#task-history")
    entry = history.locator("li[data-task-id]", has_text="a note about zebras")
    expect(entry).to_contain_text("Answer")  # the mode by its name
    expect(entry.locator("time")).to_be_visible()
    expect(entry.locator(".badge")).to_have_text("completed")
    page.locator("#task-search").fill("zebras")
    expect(history.locator("li[data-task-id]")).to_have_count(1)
    page.locator("#task-search").fill("no such words anywhere")
    expect(history).to_contain_text("No task matches")
    page.locator("#task-search").fill("")
    page.once("dialog", lambda d: d.accept())
    task.get_by_role("button", name="Delete task").click()
    expect(task).to_have_count(0)
    page.locator("#task-search").fill("zebras")
    expect(history).to_contain_text("No task matches")


def test_a_workspace_from_an_uploaded_zip_is_created_and_selected(page: Page, server, artifacts):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("proj/app.py", "print('hi')\n")
    log_in(page, server)
    page.get_by_text("Workspaces", exact=True).click()
    expect(page.locator("#ws-dir-disabled")).to_contain_text("workspaces.allowed_roots")
    form = page.locator("#ws-upload")
    form.get_by_label("Name").fill("uploaded")
    form.get_by_label("Archive").set_input_files(
        files=[{"name": "proj.zip", "mimeType": "application/zip", "buffer": buffer.getvalue()}]
    )
    form.get_by_role("button", name="Upload").click()
    expect(page.locator("#ws-status")).to_contain_text("“uploaded” is ready and selected")
    expect(page.locator("#workspace option:checked")).to_have_text("uploaded")
    page.screenshot(path=str(artifacts / "chat-workspace-uploaded.png"))


def test_thinking_shows_between_events_and_goes_at_the_end(page: Page, server):
    log_in(page, server)
    page.wait_for_function("window.agentkitSocket && window.agentkitSocket.opens >= 1")
    expect(page.locator("#task-history li").first).to_be_visible()
    page.wait_for_timeout(500)  # the page has opened the most recent task by now
    page.evaluate("window.agentkitOpenTask(987654)")  # a task opened in the pane
    event = {"task_id": 987654, "ts": "2026-01-01T00:00:00Z"}
    started = {**event, "type": "task_started", "seq": 1, "data": {"goal": "g", "model": "main"}}
    page.evaluate("ev => window.agentkitSocket.inject(ev)", started)
    task = page.locator('article.task[data-task-id="987654"]')
    thinking = task.locator("[data-role=thinking]")
    expect(thinking).to_be_hidden()  # an event just arrived
    expect(thinking).to_be_visible(timeout=3_000)  # nothing for a while: the model is working
    expect(thinking).to_have_text("thinking…")
    token = {**event, "type": "token", "seq": 2, "data": {"step": 1, "text": "hi"}}
    page.evaluate("ev => window.agentkitSocket.inject(ev)", token)
    expect(thinking).to_be_hidden()
    finished = {**event, "type": "task_finished", "seq": 3, "data": {"status": "completed"}}
    page.evaluate("ev => window.agentkitSocket.inject(ev)", finished)
    page.wait_for_timeout(1_500)
    expect(thinking).to_be_hidden()
    expect(task.get_by_role("button", name="Stop")).to_be_hidden()


def test_a_taken_over_task_says_what_was_kept_and_why(page: Page, server):
    """The notes of a run that resumes after its process died: a restart from the beginning (a
    plan that died before its spec was confirmed), then a resume that kept its finished steps,
    each with the reason the server gave."""
    log_in(page, server)
    page.wait_for_function("window.agentkitSocket && window.agentkitSocket.opens >= 1")
    page.evaluate("window.agentkitOpenTask(987655)")
    event = {"task_id": 987655, "ts": "2026-01-01T00:00:00Z"}
    why = "taken over automatically: the process running it stopped beating"
    for seq, kind, data in [
        (1, "task_started", {"goal": "g", "model": "main"}),
        (2, "task_resumed", {"steps": 0, "phase": None, "restarted": True, "reason": why}),
        (3, "task_started", {"goal": "g", "model": "main"}),
        (4, "task_resumed", {"steps": 2, "phase": None, "reason": why}),
    ]:
        page.evaluate(
            "ev => window.agentkitSocket.inject(ev)",
            {**event, "seq": seq, "type": kind, "data": data},
        )
    notes = page.locator('article.task[data-task-id="987655"] .phase-note')
    expect(notes).to_have_count(2)
    expect(notes.nth(0)).to_have_text(
        f"Started again after a restart: nothing was done yet ({why})."
    )
    expect(notes.nth(1)).to_have_text(f"Resumed after a restart: 2 finished steps kept ({why}).")
