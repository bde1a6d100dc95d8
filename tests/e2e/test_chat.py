"""The chat page as a person uses it: real Daphne, real socket, the offline scripted model."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.bounds import TASK_MS
from tests.e2e.test_login import log_in
from tests.support import ROOT, agentkit_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def slow_server(tmp_path_factory):
    """The shipped config, with the scripted model streaming slowly enough to reload mid-task."""
    tmp = tmp_path_factory.mktemp("chat")
    shipped = (ROOT / "agentkit.yaml").read_text()
    config = tmp / "agentkit.yaml"
    config.write_text(shipped.replace("chunk_delay_ms: 25", "chunk_delay_ms: 90"))
    assert config.read_text() != shipped
    with agentkit_server(tmp, AGENTKIT_CONFIG=str(config)) as server:
        yield server


def sent_task(page: Page):
    """The article of the task just sent. The page may have opened the latest conversation
    (an earlier test's) before the message went: the new turn is then a follow-up, shown below
    that task once its first event came (the "Starting…" placeholder goes then)."""
    expect(page.locator(".pending-task")).to_have_count(0, timeout=TASK_MS)
    return page.locator("article.task").last


def rendered_seqs(page: Page, task_id: str) -> list[int]:
    return page.evaluate(f"window.agentkitRendered[{task_id}] || []")


def test_demo_task_streams_survives_a_reload_and_finishes(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()

    task = page.locator("article.task").first
    expect(task.locator(".bubble.user")).to_have_text("fix the failing test in tests/test_slug.py")
    expect(task.locator(".bubble.assistant").first).not_to_be_empty()
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_be_visible()
    expect(task.locator("[data-role=status]")).to_have_text("running")
    page.screenshot(path=str(artifacts / "chat-streaming.png"), full_page=True)

    # Reload while the task is still running: the page resumes from the stored events.
    expect(page).to_have_url(re.compile(r"#task-\d+$"))
    task_id = page.url.rsplit("-", 1)[1]
    page.reload()
    task = page.locator(f'article.task[data-task-id="{task_id}"]')
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)

    expect(task.locator(".bubble.user")).to_have_count(1)
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_have_count(1)
    expect(task.locator('.tool-card[data-tool="str_replace_editor"]')).to_have_count(1)
    expect(task.locator(".tool-card.ok")).to_have_count(2)
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # no gap, no duplicate, in order
    expect(task.locator(".task-footer")).to_contain_text("tokens in")
    assert "[^a-zA-Z0-9]+" in task.locator(".bubble.assistant").last.inner_text()

    # The edit card shows the diff; the history sidebar lists the task.
    edit = task.locator('.tool-card[data-tool="str_replace_editor"]')
    edit.locator("summary").click()
    expect(edit.locator(".result")).to_be_visible()
    expect(page.locator("#task-history")).to_contain_text("fix the failing test")
    page.screenshot(path=str(artifacts / "chat-completed-after-reload.png"), full_page=True)

    # The API tells the same story.
    api = page.request.get(f"{slow_server.url}/api/tasks/{task_id}/events?after=0").json()["events"]
    assert [e["seq"] for e in api] == seqs


def test_chat_mode_answers_without_tools(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("@chat hello")
    page.get_by_role("button", name="Send").click()
    task = sent_task(page)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".bubble.assistant")).to_contain_text("offline scripted model")
    expect(task.locator(".tool-card")).to_have_count(0)


def test_a_dropped_connection_reconnects_and_loses_nothing(page: Page, slow_server, artifacts):
    log_in(page, slow_server)
    page.locator("#message").fill("fix the failing test in tests/test_slug.py")
    page.get_by_role("button", name="Send").click()
    task = sent_task(page)
    expect(task.locator(".bubble.assistant").first).not_to_be_empty()
    task_id = task.get_attribute("data-task-id")
    page.evaluate("window.agentkitSocket.drop()")
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    # it reconnects by itself (after a backoff: on a busy machine the run may end first)
    page.wait_for_function("window.agentkitSocket.opens >= 2", timeout=TASK_MS)
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    stored = page.request.get(f"{slow_server.url}/api/tasks/{task_id}/events?after=0").json()[
        "events"
    ]
    assert len(stored) == len(seqs)
    # (the earlier test fixed the demo already: the model reads slugify and finds nothing to do)
    expect(task.locator('.tool-card[data-tool="read_file"]')).to_have_count(1)


def test_a_message_whose_socket_died_as_it_went_still_gets_its_task_once(
    page: Page, slow_server, artifacts
):
    """The socket closes in the same moment the message leaves: the server makes the task, but
    the page never hears of it on that socket. On the next socket the page sends the same message
    again (same client_msg_id) and shows that task, from its first event, once."""
    log_in(page, slow_server)
    page.locator("#message").fill("@chat hello from a dying socket")
    expect(page.locator("body")).to_have_attribute("data-socket", "open")
    page.evaluate("document.querySelector('#send').click(); window.agentkitSocket.drop();")
    task = sent_task(page)
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(task.locator(".bubble.user")).to_have_text("hello from a dying socket")
    assert page.evaluate("window.agentkitSocket.opens") >= 2
    task_id = task.get_attribute("data-task-id")
    seqs = rendered_seqs(page, task_id)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    listed = page.request.get(f"{slow_server.url}/api/tasks?q=dying").json()["tasks"]
    assert [t["id"] for t in listed] == [int(task_id)]  # one task, not one per sending


def _hold_server_frames(page: Page) -> tuple[dict, list]:
    """Route the chat socket through the test: frames from the server wait in `held` until
    gate["open"]; the page's frames go straight through."""
    gate, held = {"open": False}, []

    def handler(ws):
        server = ws.connect_to_server()

        def from_server(message):
            if gate["open"]:
                ws.send(message)
            else:
                held.append((ws, message))

        server.on_message(from_server)

    page.route_web_socket(re.compile(r"/ws/chat/"), handler)
    return gate, held


def _release(gate: dict, held: list) -> None:
    gate["open"] = True
    for ws, message in held:
        ws.send(message)
    held.clear()


def test_a_message_sent_before_the_task_list_came_still_shows_its_task(
    page: Page, slow_server, artifacts
):
    """On a busy machine the page's first task list can come after a message sent at once, and
    already name that message's task; its first event comes later still. The page shows the task
    all the same (the "Starting…" placeholder goes), as when the list came first."""
    lists = []

    def hold_first_list(route):
        if lists:
            route.continue_()
        else:
            lists.append(route)  # the sidebar's first list waits

    page.route(re.compile(r"/api/tasks$"), hold_first_list)
    gate, held = _hold_server_frames(page)
    log_in(page, slow_server)
    page.locator("#message").fill("@chat hello before the list came")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".pending-task")).to_have_count(1)

    made = []
    for _ in range(TASK_MS // 200):  # the server has made the task
        made = page.request.get(f"{slow_server.url}/api/tasks?q=before+the+list").json()["tasks"]
        if made:
            break
        page.wait_for_timeout(200)
    assert len(made) == 1, made
    assert lists, "the sidebar asked for its first list"
    lists[0].continue_()  # the list comes, naming the new task ...
    expect(page.locator("#task-history")).to_contain_text("hello before the list came")
    _release(gate, held)  # ... and then the task's events
    task = page.locator(f'article.task[data-task-id="{made[0]["id"]}"]')
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    expect(page.locator(".pending-task")).to_have_count(0)
    expect(task.locator(".bubble.user")).to_have_text("hello before the list came")
    expect(page).to_have_url(re.compile(rf"#task-{made[0]['id']}$"))


def test_an_open_still_loading_does_not_replace_the_task_just_sent(
    page: Page, slow_server, artifacts
):
    """The page opens the latest conversation by itself; when a message goes (and its task
    shows) before that open has loaded, the open is dropped: the page stays on the new task."""
    log_in(page, slow_server)
    page.locator("#message").fill("@chat an earlier conversation")
    page.get_by_role("button", name="Send").click()
    earlier = sent_task(page)
    expect(earlier.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)

    lookups = re.compile(r"/api/(tasks|conversations)/\d+$")
    holding, held = {"on": True}, []
    page.route(lookups, lambda route: held.append(route) if holding["on"] else route.continue_())
    page.goto(f"{slow_server.url}/")  # opens the latest conversation: its lookups wait
    expect(page.locator("body")).to_have_attribute("data-socket", "open")
    page.wait_for_function("window.agentkitChat.navigation >= 1")  # the open has begun
    page.locator("#message").fill("@chat a message sent meanwhile")
    page.get_by_role("button", name="Send").click()
    task = page.locator("article.task").filter(has_text="a message sent meanwhile")
    expect(task.locator("[data-role=status]")).to_have_text("completed", timeout=TASK_MS)
    task_id = task.get_attribute("data-task-id")
    expect(page).to_have_url(re.compile(rf"#task-{task_id}$"))

    holding["on"] = False
    assert held, "the page's own open asked for the conversation"
    with page.expect_response(lookups):
        for route in held:
            route.continue_()
    page.wait_for_timeout(500)  # the open's code after its lookups has run
    expect(page).to_have_url(re.compile(rf"#task-{task_id}$"))
    expect(task.locator("[data-role=status]")).to_have_text("completed")
