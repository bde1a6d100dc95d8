"""Workspaces made from the chat page: allowed server directories, uploaded archives (hostile
ones refused, nothing left behind), the demo's reset; and deleting a task (owner only)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from apps.tasks.models import Task, Workspace
from tests.support import ROOT, migrate_sqlite, server_env
from tests.tasks.factories import make_task, make_user, make_workspace

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def client(alice):
    c = Client()
    c.force_login(alice)
    return c


@pytest.fixture
def wsdir(settings, tmp_path):
    settings.AGENTKIT_WORKSPACES_DIR = tmp_path / "workspaces"
    return tmp_path / "workspaces"


def _allow(config_file, root, extra=""):
    config_file(f"workspaces: {{allowed_roots: [{json.dumps(str(root))}]{extra}}}\n")


def test_creating_from_a_directory_is_off_until_an_admin_allows_roots(
    client, config_file, tmp_path
):
    config_file("{}\n")
    response = client.post(
        "/api/workspaces",
        {"name": "p", "directory": str(tmp_path)},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "workspaces.allowed_roots" in response.json()["error"]["message"]


def test_a_directory_under_an_allowed_root_becomes_a_workspace_of_the_user(
    client, alice, config_file, tmp_path
):
    (tmp_path / "projects" / "app").mkdir(parents=True)
    _allow(config_file, tmp_path / "projects")
    response = client.post(
        "/api/workspaces",
        {"name": "app", "directory": str(tmp_path / "projects" / "app")},
        content_type="application/json",
    )
    assert response.status_code == 201
    ws = Workspace.objects.get(name="app")
    assert ws.root_dir == str((tmp_path / "projects" / "app").resolve())
    assert list(ws.members.all()) == [alice]


@pytest.mark.parametrize("where", ["outside", "dotdot", "root_itself", "symlink_out"])
def test_directories_outside_the_allowed_roots_are_refused(client, config_file, tmp_path, where):
    allowed = tmp_path / "projects"
    allowed.mkdir()
    (tmp_path / "secret").mkdir()
    (allowed / "link").symlink_to(tmp_path / "secret")
    _allow(config_file, allowed)
    directory = {
        "outside": tmp_path / "secret",
        "dotdot": f"{allowed}/../secret",
        "root_itself": allowed,
        "symlink_out": allowed / "link",
    }[where]
    response = client.post(
        "/api/workspaces",
        {"name": "x", "directory": str(directory)},
        content_type="application/json",
    )
    assert response.status_code == 400, response.json()
    assert not Workspace.objects.filter(name="x").exists()


def test_allowed_roots_must_be_absolute(config_file):
    from apps.engine.config import ConfigError

    with pytest.raises(ConfigError, match="absolute"):
        config_file("workspaces: {allowed_roots: [relative/dir]}\n")


# ── archives ───────────────────────────────────────────────────────────────────────────────────
def _zip(members: dict[str, bytes], symlinks=()) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in symlinks:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target)
    return buffer.getvalue()


def _tar(add) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        add(tf)
    return buffer.getvalue()


def _file(tf, name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def _link(tf, name, target, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    tf.addfile(info)


def _upload(client, filename, data, name="up"):
    return client.post(
        "/api/workspaces/upload",
        {"name": name, "archive": SimpleUploadedFile(filename, data)},
    )


def test_a_zip_of_one_project_folder_becomes_a_workspace(client, wsdir, alice):
    data = _zip({"proj/app.py": b"print(1)\n", "proj/tests/test_app.py": b"def test(): pass\n"})
    response = _upload(client, "proj.zip", data)
    assert response.status_code == 201, response.json()
    ws = Workspace.objects.get(name="up")
    assert (wsdir.resolve() / "uploads") in Path(ws.root_dir).parents
    assert Path(ws.root_dir, "app.py").read_text() == "print(1)\n"
    assert list(ws.members.all()) == [alice]


def test_a_tar_gz_becomes_a_workspace(client, wsdir):
    response = _upload(client, "p.tar.gz", _tar(lambda tf: _file(tf, "a.txt", b"hi")))
    assert response.status_code == 201, response.json()
    assert Path(Workspace.objects.get(name="up").root_dir, "a.txt").read_text() == "hi"


HOSTILE = {
    "zip_dotdot": ("x.zip", lambda: _zip({"../evil.py": b"x"})),
    "zip_absolute": ("x.zip", lambda: _zip({"/tmp/evil.py": b"x"})),
    "zip_symlink": ("x.zip", lambda: _zip({"a.txt": b"x"}, symlinks=[("link", "/etc")])),
    "zip_bomb": ("x.zip", lambda: _zip({"big.bin": b"\0" * (3 * 1024 * 1024)})),
    "tar_dotdot": ("x.tar.gz", lambda: _tar(lambda tf: _file(tf, "a/../../evil.py"))),
    "tar_absolute": ("x.tar.gz", lambda: _tar(lambda tf: _file(tf, "/etc/evil"))),
    "tar_symlink": ("x.tar.gz", lambda: _tar(lambda tf: _link(tf, "escape", "/etc"))),
    "tar_hardlink": (
        "x.tar.gz",
        lambda: _tar(lambda tf: _link(tf, "h", "/etc/passwd", tarfile.LNKTYPE)),
    ),
    "too_many_files": ("x.zip", lambda: _zip({f"f{i}": b"" for i in range(30)})),
    "not_an_archive": ("x.zip", lambda: b"this is not a zip"),
    "wrong_type": ("x.rar", lambda: b"Rar!"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archives_are_refused_and_leave_nothing(client, wsdir, config_file, tmp_path, case):
    config_file("workspaces: {upload_max_unpacked_mb: 2, upload_max_files: 20}\n")
    filename, make = HOSTILE[case]
    response = _upload(client, filename, make())
    assert response.status_code == 400, response.json()
    assert response.json()["error"]["message"]
    assert not Workspace.objects.filter(name="up").exists()
    uploads = wsdir / "uploads"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    assert not (tmp_path / "evil.py").exists() and not (wsdir / "evil.py").exists()


def test_an_archive_over_the_upload_cap_is_refused(client, wsdir, config_file):
    config_file("workspaces: {upload_max_mb: 1}\n")
    response = _upload(client, "x.zip", b"\0" * (1024 * 1024 + 10))
    assert response.status_code == 400 and "over 1 MB" in response.json()["error"]["message"]


# ── the demo ───────────────────────────────────────────────────────────────────────────────────
def test_bootstrap_reset_demo_and_the_reset_api_restore_the_shipped_demo(wsdir, client, alice):
    call_command("bootstrap")
    slug = wsdir / "demo" / "textkit" / "slug.py"
    shipped = slug.read_text()
    slug.write_text("broken")
    (wsdir / "demo" / "extra.txt").write_text("x")
    call_command("bootstrap", "--reset-demo")
    assert slug.read_text() == shipped and not (wsdir / "demo" / "extra.txt").exists()

    slug.write_text("broken again")
    assert client.post("/api/workspaces/demo/reset").status_code == 404  # not a member
    Workspace.objects.get(name="demo").members.add(alice)
    assert client.post("/api/workspaces/demo/reset").status_code == 200
    assert slug.read_text() == shipped


def test_the_demo_is_not_reset_while_a_task_runs_in_it(wsdir, client, alice):
    call_command("bootstrap")
    demo = Workspace.objects.get(name="demo")
    demo.members.add(alice)
    make_task(alice, demo, status="running")
    response = client.post("/api/workspaces/demo/reset")
    assert response.status_code == 400 and response.json()["error"]["code"] == "task_running"


# ── deleting tasks ─────────────────────────────────────────────────────────────────────────────
def test_the_owner_deletes_a_finished_task_and_another_member_cannot(client, alice, tmp_path):
    bob = make_user("bob")
    ws = make_workspace("shared", tmp_path, alice, bob)
    mine = make_task(alice, ws, status="completed")
    theirs = make_task(bob, ws, status="completed")
    running = make_task(alice, ws, status="running")
    assert client.delete(f"/api/tasks/{theirs.pk}").status_code == 403
    assert client.delete(f"/api/tasks/{running.pk}").json()["error"]["code"] == "task_running"
    assert client.delete(f"/api/tasks/{mine.pk}").json() == {"id": mine.pk, "deleted": True}
    assert set(Task.objects.values_list("pk", flat=True)) == {theirs.pk, running.pk}
    outsider = Client()
    outsider.force_login(make_user("eve"))
    assert outsider.delete(f"/api/tasks/{theirs.pk}").status_code == 404


def test_history_search_finds_tasks_by_text(client, alice, tmp_path):
    ws = make_workspace("w", tmp_path, alice)
    make_task(alice, ws, goal="fix the slug bug")
    make_task(alice, ws, goal="write the release notes")
    found = client.get("/api/tasks?q=SLUG").json()["tasks"]
    assert [t["goal"] for t in found] == ["fix the slug bug"] and found[0]["mine"] is True


def test_one_message_limit_for_the_page_and_the_server(client, alice, tmp_path, settings):
    settings.AGENTKIT_MAX_MESSAGE_CHARS = 100
    ws = make_workspace("w", tmp_path, alice)
    page = client.get("/")
    assert 'data-max-chars="100"' in page.content.decode()
    response = client.post(
        "/api/tasks", {"workspace": ws.pk, "text": "x" * 101}, content_type="application/json"
    )
    assert response.json()["error"]["code"] == "message_too_long"
    assert "at most 100" in response.json()["error"]["message"]


def test_call_tool_resolves_a_workspace_name_before_a_directory(tmp_path):
    env = server_env(tmp_path)
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "manage.py", *a],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    migrate_sqlite(env)
    assert run("bootstrap").returncode == 0
    done = run(
        "call_tool", "read_file", "--workspace", "demo", "--args", '{"path": "textkit/slug.py"}'
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ok"] and "slugify" in json.loads(done.stdout)["output"]
