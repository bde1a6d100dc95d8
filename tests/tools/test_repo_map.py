"""The repository map (apps/tools/builtin/repo_map.py): a deterministic outline of a workspace
(paths and top-level definitions) within a token budget, leaving out what `search` leaves out,
binary files and the definitions of huge files, and bounded in time."""

from __future__ import annotations

import os
import time

from apps.tools.builtin.repo_map import CHARS_PER_TOKEN, MAX_PARSE_BYTES, build_repo_map


def _map(root, max_tokens=1024, time_limit_seconds=10.0) -> str:
    return build_repo_map(root, max_tokens=max_tokens, time_limit_seconds=time_limit_seconds)


def _body(text: str) -> list[str]:
    """The map's lines after the heading and the one-line introduction."""
    return text.splitlines()[2:]


def _write(root, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_map_lists_files_sorted_and_grouped_with_their_top_level_definitions(tmp_path):
    _write(
        tmp_path, "src/pkg/b.py", "def beta():\n    pass\n\n\nclass Gamma:\n    def m(self): ...\n"
    )
    _write(tmp_path, "src/pkg/a.py", "def alpha():\n    def inner(): ...\n")
    _write(tmp_path, "README.md", "# hi\n")
    _write(tmp_path, "src/main.py", "def main(): ...\ndef _private(): ...\n")

    text = _map(tmp_path)

    assert text.startswith("## Repository map\n")
    assert _body(text) == [
        "README.md",
        "src/",
        "  main.py: main",
        "src/pkg/",
        "  a.py: alpha",
        "  b.py: beta, Gamma",
    ]


def test_map_is_byte_identical_whatever_order_the_files_were_made_in(tmp_path):
    names = [f"pkg/m{i:02d}.py" for i in range(30)]
    first, second = tmp_path / "one", tmp_path / "two"
    for name in names:
        _write(first, name, f"def f_{name[-6:-3]}(): ...\n")
    for name in reversed(names):
        _write(second, name, f"def f_{name[-6:-3]}(): ...\n")

    assert _map(first) == _map(second) == _map(first)


def test_ignored_dependency_binary_and_linked_files_are_left_out(tmp_path):
    _write(tmp_path, ".gitignore", "build/\n*.log\n")
    _write(tmp_path, "app.py", "def run(): ...\n")
    _write(tmp_path, "build/gen.py", "def generated(): ...\n")
    _write(tmp_path, "debug.log", "noise\n")
    _write(tmp_path, "node_modules/lib/index.js", "function dep() {}\n")
    _write(tmp_path, ".venv/lib/site.py", "def venv(): ...\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "data.py").write_bytes(b"def x():\x00 pass\n")
    os.symlink(tmp_path / "app.py", tmp_path / "alias.py")

    text = _map(tmp_path)

    assert _body(text) == [".gitignore", "app.py: run"]


def test_a_huge_file_is_listed_without_its_definitions(tmp_path):
    filler = "# " + "x" * 98 + "\n"
    _write(tmp_path, "big.py", "def hidden(): ...\n" + filler * (MAX_PARSE_BYTES // 100 + 1))
    _write(tmp_path, "small.py", "def shown(): ...\n")

    assert _body(_map(tmp_path)) == ["big.py", "small.py: shown"]


def test_over_budget_later_files_lose_their_definitions_first(tmp_path):
    for i in range(40):
        _write(
            tmp_path, f"mod_{i:02d}.py", "".join(f"def helper_{i}_{j}(): ...\n" for j in range(8))
        )

    full = _map(tmp_path, max_tokens=100_000)
    capped = _map(tmp_path, max_tokens=400)

    assert len(full) > 400 * CHARS_PER_TOKEN
    assert len(capped) <= 400 * CHARS_PER_TOKEN
    lines = _body(capped)
    assert [line.split(":")[0] for line in lines[:40]] == [f"mod_{i:02d}.py" for i in range(40)]
    assert lines[0].startswith("mod_00.py: helper_0_0, helper_0_1")
    assert lines[39] == "mod_39.py"  # every path, the last ones bare
    named = sum(1 for line in lines if ": helper_" in line)
    assert 0 < named < 40
    assert lines[-1] == (
        f"[Map cut to its token budget: definitions shown for the first {named} of 40 files; "
        "search finds the rest.]"
    )


def test_deep_paths_that_fit_keep_every_definition(tmp_path):
    deep = "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p"
    for i in range(40):
        _write(tmp_path, f"{deep}/m{i:02d}.py", f"def f{i}(): ...\n")

    text = _map(tmp_path, max_tokens=300)

    assert len(text) <= 300 * CHARS_PER_TOKEN
    assert _body(text) == [f"{deep}/"] + [f"  m{i:02d}.py: f{i}" for i in range(40)]


def test_when_paths_do_not_fit_directories_are_listed_with_their_file_counts(tmp_path):
    for d in range(12):
        for i in range(30):
            _write(tmp_path, f"area_{d:02d}/long_module_name_{i:03d}.py", "def f(): ...\n")

    text = _map(tmp_path, max_tokens=200)
    tiny = _map(tmp_path, max_tokens=100)

    assert len(text) <= 200 * CHARS_PER_TOKEN and len(tiny) <= 100 * CHARS_PER_TOKEN
    assert _body(text)[:12] == [f"area_{d:02d}/ (30 files)" for d in range(12)]
    assert _body(text)[-1] == (
        "[Map cut to its token budget: directories with their number of files; search finds "
        "the rest.]"
    )
    assert "more not listed" in _body(tiny)[-1]


def test_map_stops_at_its_time_limit_and_says_it_is_partial(tmp_path):
    for d in range(20):
        for i in range(250):
            _write(tmp_path, f"d{d:02d}/m{i:03d}.py", f"def f{i}(): ...\n")

    started = time.monotonic()
    partial = _map(tmp_path, max_tokens=1_000_000, time_limit_seconds=0.05)
    elapsed = time.monotonic() - started
    complete = _map(tmp_path, max_tokens=1_000_000, time_limit_seconds=60)

    assert len(_body(complete)) == 20 + 5000  # a line per directory and per file
    assert elapsed < 5  # the full walk of 5,000 files is what it skipped
    assert partial == "" or (
        partial.endswith("[Map stopped after 0.05 s: more files exist.]")
        and len(_body(partial)) < len(_body(complete))
    )


def test_an_empty_or_missing_workspace_gives_no_map(tmp_path):
    assert _map(tmp_path) == ""
    assert _map(tmp_path / "missing") == ""


def test_a_file_changed_since_the_last_map_shows_its_new_definitions(tmp_path, monkeypatch):
    """Files unchanged since the last map are taken from the per-process memo; a change shows
    even when it keeps the size and the modification time (the change time still moves)."""
    from apps.tools.builtin import repo_map

    monkeypatch.setattr(repo_map, "RACY_SECONDS", 0.0)  # remember files however fresh
    _write(tmp_path, "a.py", "def alpha(): ...\n")
    _write(tmp_path, "blob.bin", "x\x00y")
    _write(tmp_path, "b.py", "def beta(): ...\n")
    first = _map(tmp_path)
    assert "a.py: alpha" in _body(first) and "blob.bin" not in first
    assert (os.stat(tmp_path / "a.py").st_dev, os.stat(tmp_path / "a.py").st_ino) in repo_map._memo
    assert _map(tmp_path) == first  # from the memo: the same bytes
    before = os.stat(tmp_path / "a.py")
    (tmp_path / "a.py").write_text("def gamma(): ...\n")  # same size
    os.utime(tmp_path / "a.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    (tmp_path / "blob.bin").write_text("text now\n")
    changed = _body(_map(tmp_path))
    assert "a.py: gamma" in changed and "b.py: beta" in changed and "blob.bin" in changed
