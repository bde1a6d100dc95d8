"""str_replace_editor keeps a file's line endings and encoding: CRLF and LF files, UTF-8 (with and
without a BOM) and Latin-1 come through edits and undo_edit byte for byte."""

from __future__ import annotations

from tests.tools.editor_support import edit

# --- line endings -----------------------------------------------------------------------------


async def test_crlf_file_round_trips_unchanged(call, workspace):
    original = b"first line\r\nsecond line\r\nthird line\r\n"
    (workspace / "win.txt").write_bytes(original)

    replaced = await edit(
        call,
        command="str_replace",
        path="win.txt",
        old_str="second line\nthird",
        new_str="2nd line\n3rd",
    )
    assert replaced.ok, replaced.error
    assert (workspace / "win.txt").read_bytes() == b"first line\r\n2nd line\r\n3rd line\r\n"

    inserted = await edit(
        call, command="insert_at_line", path="win.txt", insert_line=1, new_str="a\nb"
    )
    assert inserted.ok
    assert (workspace / "win.txt").read_bytes() == (
        b"first line\r\na\r\nb\r\n2nd line\r\n3rd line\r\n"
    )

    await edit(call, command="undo_edit", path="win.txt")
    await edit(call, command="undo_edit", path="win.txt")
    assert (workspace / "win.txt").read_bytes() == original


async def test_lf_file_stays_lf_when_the_model_sends_crlf(call, workspace):
    (workspace / "unix.txt").write_bytes(b"a\nb\n")

    replaced = await edit(
        call, command="str_replace", path="unix.txt", old_str="a\r\nb", new_str="x\r\ny"
    )
    inserted = await edit(
        call, command="insert_at_line", path="unix.txt", insert_line=0, new_str="0\r\n"
    )

    assert replaced.ok and inserted.ok
    assert (workspace / "unix.txt").read_bytes() == b"0\nx\ny\n"


async def test_crlf_is_kept_when_a_file_is_overwritten(call, workspace):
    (workspace / "win.txt").write_bytes(b"a\r\nb\r\n")

    await edit(call, command="create", path="win.txt", file_text="c\nd\n", overwrite=True)

    assert (workspace / "win.txt").read_bytes() == b"c\r\nd\r\n"


# --- encodings --------------------------------------------------------------------------------


async def test_unicode_file_round_trips_unchanged(call, workspace):
    original = "# -*- coding: utf-8 -*-\nnames = ['Zoë', 'Łukasz', '李雷', '🚀']\nπ = 3.14159\n"
    (workspace / "u.py").write_text(original, encoding="utf-8")

    replaced = await edit(call, command="str_replace", path="u.py", old_str="'🚀'", new_str="'🛸'")
    assert replaced.ok
    assert (workspace / "u.py").read_text(encoding="utf-8") == original.replace("🚀", "🛸")
    untouched = original.encode("utf-8").split(b"\n")[2]
    assert (workspace / "u.py").read_bytes().split(b"\n")[2] == untouched

    await edit(call, command="undo_edit", path="u.py")
    assert (workspace / "u.py").read_bytes() == original.encode("utf-8")


async def test_utf8_bom_and_latin1_files_keep_their_encoding(call, workspace):
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbfcaf\xc3\xa9\n")
    (workspace / "legacy.txt").write_bytes("façade\nnaïve\n".encode("latin-1"))

    bom = await edit(call, command="str_replace", path="bom.txt", old_str="café", new_str="thé")
    legacy = await edit(
        call, command="str_replace", path="legacy.txt", old_str="naïve", new_str="né"
    )
    euro = await edit(call, command="str_replace", path="legacy.txt", old_str="né", new_str="€")

    assert bom.ok and legacy.ok
    assert (workspace / "bom.txt").read_bytes() == b"\xef\xbb\xbfth\xc3\xa9\n"
    assert (workspace / "legacy.txt").read_bytes() == "façade\nné\n".encode("latin-1")
    assert euro.error_code == "encoding_error"
