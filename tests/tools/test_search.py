"""search on real directory trees: regex matches as path:line:text, .gitignore (checked against
git itself), binary files, caps, the glob finder, and no way out through symbolic links."""

from __future__ import annotations

import shutil
import subprocess

from apps.tools.builtin.paths import resolve_path
from apps.tools.builtin.search import GitIgnore, compile_glob, walk_files


async def search(call, **arguments):
    return await call("search", **arguments)


def write(root, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def test_regex_matches_are_shown_as_path_line_text(call, workspace):
    write(workspace, "src/app.py", "import os\n\ndef main():\n    return os.getcwd()\n")
    write(workspace, "src/util.py", "def helper():\n    pass\n")

    result = await search(call, pattern=r"def \w+\(")

    assert result.ok
    assert result.output.splitlines() == ["src/app.py:3:def main():", "src/util.py:1:def helper():"]


async def test_search_respects_gitignore_at_every_level(call, workspace):
    write(workspace, ".gitignore", "*.log\nbuild/\n/secrets.txt\n!keep.log\n")
    write(workspace, "app.py", "needle\n")
    write(workspace, "debug.log", "needle\n")
    write(workspace, "keep.log", "needle\n")
    write(workspace, "build/out.py", "needle\n")
    write(workspace, "secrets.txt", "needle\n")
    write(workspace, "nested/secrets.txt", "needle\n")  # '/secrets.txt' is anchored to the root
    write(workspace, "nested/.gitignore", "generated_*.py\n")
    write(workspace, "nested/generated_models.py", "needle\n")
    write(workspace, "nested/models.py", "needle\n")
    write(workspace, "node_modules/lib/index.js", "needle\n")

    result = await search(call, pattern="needle")

    found = sorted(line.split(":")[0] for line in result.output.splitlines())
    assert found == ["app.py", "keep.log", "nested/models.py", "nested/secrets.txt"]


def test_gitignore_handling_agrees_with_git(workspace):
    assert shutil.which("git"), "git is needed for this test: apt-get install git"
    write(
        workspace,
        ".gitignore",
        "# comment\n*.pyc\n/dist\ndocs/_build/\n**/tmp/**\n!important.pyc\nlogs/*.txt\n"
        "\\#literal\nspace\\ \n",
    )
    write(workspace, "pkg/.gitignore", "local.cfg\n/only_here.txt\n")
    files = [
        "a.py", "a.pyc", "important.pyc", "dist/x.js", "src/dist/y.js", "docs/_build/i.html",
        "docs/index.md", "x/tmp/y/z.txt", "tmp/top.txt", "logs/a.txt", "logs/sub/b.txt",
        "#literal", "space ", "pkg/local.cfg", "pkg/sub/local.cfg", "pkg/only_here.txt",
        "pkg/sub/only_here.txt", "only_here.txt", "pkg/keep.py",
    ]  # fmt: skip
    for name in files:
        write(workspace, name, "x\n")
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "-z"],
        cwd=workspace,
        capture_output=True,
        check=True,
    ).stdout.decode()
    expected = sorted(name for name in listed.split("\0") if name)

    ours = sorted(relative for relative, _, _ in walk_files(resolve_path(workspace, ".")))

    assert ours == expected


async def test_binary_files_are_skipped(call, workspace):
    (workspace / "blob.bin").write_bytes(b"needle\x00\x01\x02")
    write(workspace, "text.txt", "needle\n")

    result = await search(call, pattern="needle")

    assert result.output.splitlines()[0] == "text.txt:1:needle"
    assert "blob.bin" not in result.output
    assert "Skipped 1 binary" in result.output


async def test_results_are_capped_with_a_note(call, workspace):
    write(workspace, "many.txt", "".join(f"hit {i}\n" for i in range(500)))

    default = await search(call, pattern="hit")
    capped = await search(call, pattern="hit", max_results=5)

    assert default.data["results"] == 100
    assert capped.output.splitlines()[:5] == [f"many.txt:{i}:hit {i - 1}" for i in range(1, 6)]
    assert capped.data == {"results": 5, "more": True, "files_scanned": 1, "timed_out": False}
    assert "Showing the first 5 results" in capped.output


async def test_very_long_matching_lines_are_shortened(call, workspace):
    write(workspace, "min.js", "x" * 5000 + "needle" + "y" * 5000 + "\n")

    result = await search(call, pattern="needle")

    assert len(result.output) < 400
    assert result.output.startswith("min.js:1:xxx")


async def test_glob_finds_files_at_any_depth_or_below_a_directory(call, workspace):
    for name in ["a.py", "src/b.py", "src/deep/c.py", "src/d.ts", "README.md"]:
        write(workspace, name)

    everywhere = await search(call, glob="**/*.py")
    by_name = await search(call, glob="*.py")
    top_of_src = await search(call, glob="src/*.py")
    in_subdir = await search(call, glob="*.py", path="src/deep")

    assert everywhere.output.splitlines() == ["a.py", "src/b.py", "src/deep/c.py"]
    assert by_name.output.splitlines() == everywhere.output.splitlines()
    assert top_of_src.output.splitlines() == ["src/b.py"]
    assert in_subdir.output.splitlines() == ["src/deep/c.py"]


async def test_glob_and_pattern_together_search_only_matching_files(call, workspace):
    write(workspace, "a.py", "TODO: python\n")
    write(workspace, "b.md", "TODO: docs\n")

    result = await search(call, pattern="TODO", glob="*.py")

    assert result.output.splitlines() == ["a.py:1:TODO: python"]


async def test_path_limits_the_search_and_cannot_leave_the_workspace(call, workspace, outside):
    write(workspace, "one/x.txt", "needle\n")
    write(workspace, "two/y.txt", "needle\n")

    inside = await search(call, pattern="needle", path="two")
    single_file = await search(call, pattern="needle", path="one/x.txt")
    escaped = await search(call, pattern="TOP SECRET", path="../outside")
    absolute = await search(call, pattern="TOP SECRET", path=str(outside))

    assert inside.output.splitlines() == ["two/y.txt:1:needle"]
    assert single_file.output.splitlines() == ["one/x.txt:1:needle"]
    assert escaped.error_code == absolute.error_code == "path_outside_workspace"


async def test_symbolic_links_are_not_followed_out_of_the_workspace(call, workspace, outside):
    (workspace / "vendor").symlink_to(outside, target_is_directory=True)
    (workspace / "secret_link.txt").symlink_to(outside / "secret.txt")
    write(workspace, "mine.txt", "nothing here\n")

    found = await search(call, pattern="TOP SECRET")
    listed = await search(call, glob="**/*.txt")

    assert "No matches" in found.output
    assert listed.output.splitlines() == ["mine.txt"]


async def test_invalid_regex_is_explained(call):
    result = await search(call, pattern="foo(")

    assert result.error_code == "invalid_regex"
    assert "Escape special characters" in result.error


async def test_pattern_or_glob_is_required(call):
    result = await search(call, path=".")

    assert result.error_code == "invalid_arguments"


async def test_no_matches_is_a_successful_result_that_says_so(call, workspace):
    write(workspace, "a.txt", "alpha\n")

    result = await search(call, pattern="omega")

    assert result.ok
    assert result.output == "No matches for /omega/ in the workspace (1 files looked at)."


def test_glob_translation():
    assert compile_glob("**/*.py").fullmatch("a/b/c.py")
    assert compile_glob("**/*.py").fullmatch("c.py")
    assert not compile_glob("src/*.py").fullmatch("src/a/b.py")
    assert compile_glob("src/**/test_?.py").fullmatch("src/x/y/test_a.py")
    assert compile_glob("[!a]*.txt").fullmatch("b.txt")
    assert not compile_glob("[!a]*.txt").fullmatch("a.txt")


def test_gitignore_rules_last_match_wins_and_directories_only():
    ignore = GitIgnore()
    ignore._add("*.txt\n!keep.txt\nout/\n", "")

    assert ignore.ignored("a.txt", is_dir=False)
    assert not ignore.ignored("keep.txt", is_dir=False)
    assert ignore.ignored("x/out", is_dir=True)
    assert not ignore.ignored("x/out", is_dir=False)
