"""read_file on real files: the seed 002 U1 scenarios (symbol slices per language, full-file
reads, unknown / ambiguous symbols, unsupported extensions, error paths, line clipping, the
round trip into str_replace) plus windowing of large files."""

from __future__ import annotations

import os
import textwrap

import pytest

from tests.tools.conftest import SECRET, numbered_text

PYTHON = textwrap.dedent(
    '''\
    """Module docstring."""

    import functools


    # Shopping cart.
    # Keeps items in memory.
    class Cart:
        """A cart."""

        def __init__(self):
            self.items = []

        # Adds one item.
        @functools.cache
        def add(self, item):
            """Add an item."""
            self.items.append(item)

        class Line:
            def total(self):
                return 0


    def my_func(a, b):
        return a + b


    def add(x):
        return x
    '''
)

TYPESCRIPT = textwrap.dedent(
    """\
    import { h } from "./h";

    /** Renders the component. */
    export const renderComponent = (props: Props): string => {
      return h("div", props);
    };

    export function helper(n: number): number {
      return n * 2;
    }
    """
)

GO = textwrap.dedent(
    """\
    package server

    import "net/http"

    // HandleRequest answers one request.
    func HandleRequest(w http.ResponseWriter, r *http.Request) {
    \tw.WriteHeader(200)
    }

    func other() {}
    """
)


async def read(call, **arguments):
    return await call("read_file", **arguments)


@pytest.fixture
def python_file(workspace):
    (workspace / "cart.py").write_text(PYTHON)
    return "cart.py"


# --- happy paths ----------------------------------------------------------------------------


async def test_class_symbol_returns_only_the_class_with_its_leading_comments(call, python_file):
    result = await read(call, path=python_file, symbol="Cart")

    assert result.ok, result.error
    body = numbered_text(result.output)
    assert body.startswith("# Shopping cart.\n# Keeps items in memory.\nclass Cart:")
    assert body.endswith("            return 0")
    assert "def my_func" not in body and "import functools" not in body
    assert result.data["symbol"] == {
        "name": "Cart",
        "kind": "class",
        "start_line": 6,
        "end_line": 22,
    }


async def test_function_symbol_returns_only_the_function(call, python_file):
    result = await read(call, path=python_file, symbol="my_func")

    assert numbered_text(result.output) == "def my_func(a, b):\n    return a + b"
    assert "25\tdef my_func(a, b):" in result.output  # real line numbers of the file


async def test_method_symbol_includes_decorators_comments_and_docstring(call, python_file):
    result = await read(call, path=python_file, symbol="Cart.add")

    assert numbered_text(result.output) == (
        "    # Adds one item.\n"
        "    @functools.cache\n"
        "    def add(self, item):\n"
        '        """Add an item."""\n'
        "        self.items.append(item)"
    )
    assert result.data["symbol"]["kind"] == "method"


async def test_typescript_arrow_function_symbol(call, workspace):
    (workspace / "view.ts").write_text(TYPESCRIPT)

    result = await read(call, path="view.ts", symbol="renderComponent")

    assert result.ok, result.error
    assert numbered_text(result.output) == textwrap.dedent(
        """\
        /** Renders the component. */
        export const renderComponent = (props: Props): string => {
          return h("div", props);
        };"""
    )


async def test_go_function_symbol(call, workspace):
    (workspace / "server.go").write_text(GO)

    result = await read(call, path="server.go", symbol="HandleRequest")

    assert numbered_text(result.output) == (
        "// HandleRequest answers one request.\n"
        "func HandleRequest(w http.ResponseWriter, r *http.Request) {\n"
        "\tw.WriteHeader(200)\n"
        "}"
    )


@pytest.mark.parametrize(
    ("name", "source", "symbol", "expected"),
    [
        (
            "app.js",
            "class Store {\n  get(key) {\n    return this.m[key];\n  }\n}\nfunction other() {}\n",
            "Store.get",
            "  get(key) {\n    return this.m[key];\n  }",
        ),
        (
            "lib.rs",
            "struct Foo;\n\nimpl Foo {\n    /// Makes one.\n    #[inline]\n    pub fn new() -> Self {\n        Foo\n    }\n}\n",
            "Foo.new",
            "    /// Makes one.\n    #[inline]\n    pub fn new() -> Self {\n        Foo\n    }",
        ),
        (
            "App.java",
            'class App {\n    @Override\n    public String toString() {\n        return "app";\n    }\n}\n',
            "App.toString",
            '    @Override\n    public String toString() {\n        return "app";\n    }',
        ),
    ],
)
async def test_symbols_in_other_languages(call, workspace, name, source, symbol, expected):
    (workspace / name).write_text(source)

    result = await read(call, path=name, symbol=symbol)

    assert result.ok, result.error
    assert numbered_text(result.output) == expected


# --- edge cases --------------------------------------------------------------------------------


async def test_without_symbol_the_whole_file_is_returned(call, python_file):
    result = await read(call, path=python_file)

    assert result.ok
    assert numbered_text(result.output) == PYTHON.rstrip("\n")
    assert result.data["windowed"] is False
    assert result.data["lines"] == [1, PYTHON.count("\n")]
    assert result.output.startswith(f"[{python_file}: all {PYTHON.count(chr(10))} lines]\n")


async def test_line_numbers_are_padded_only_to_the_widest_number_shown(call, workspace):
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 13)))

    short = await read(call, path="n.txt", start_line=8, end_line=9)
    wide = await read(call, path="n.txt", start_line=9, end_line=10)

    assert short.output.splitlines()[1:] == ["8\tline 8", "9\tline 9"]
    assert wide.output.splitlines()[1:] == [" 9\tline 9", "10\tline 10"]
    assert wide.output.splitlines()[0] == "[n.txt: lines 9-10 of 12]"


async def test_unknown_symbol_is_an_error_listing_the_available_symbols(call, python_file):
    result = await read(call, path=python_file, symbol="checkout")

    assert result.error_code == "symbol_not_found"
    assert "Available symbols: Cart, Cart.__init__, Cart.add, Cart.Line, Cart.Line.total" in (
        result.error
    )
    assert result.data["available"] == [
        "Cart",
        "Cart.__init__",
        "Cart.add",
        "Cart.Line",
        "Cart.Line.total",
        "my_func",
        "add",
    ]


async def test_misspelled_symbol_gets_a_did_you_mean(call, python_file):
    result = await read(call, path=python_file, symbol="my_fun")

    assert "Did you mean 'my_func'?" in result.error


async def test_ambiguous_symbol_returns_the_first_match_and_lists_the_others(call, python_file):
    result = await read(call, path=python_file, symbol="add")

    assert result.ok
    # the module-level `add` is an exact match for the bare name, so it comes first
    assert numbered_text(result.output) == "def add(x):\n    return x"
    assert "'add' matches 2 definitions" in result.output
    assert "Cart.add (method, lines 16-18)" in result.output
    assert [m["name"] for m in result.data["other_matches"]] == ["Cart.add"]


@pytest.mark.parametrize("name", ["notes.md", "notes.txt", "Makefile"])
async def test_unsupported_extension_returns_the_whole_file_with_a_note(call, workspace, name):
    (workspace / name).write_text("# Title\n\nSome text.\n")

    result = await read(call, path=name, symbol="Title")

    assert result.ok
    assert numbered_text(result.output) == "# Title\n\nSome text."
    assert "Symbols cannot be looked up" in result.output
    assert result.data["symbol_supported"] is False


async def test_empty_file_returns_empty_content(call, workspace):
    (workspace / "empty.py").write_text("")

    result = await read(call, path="empty.py")

    assert result.ok
    assert numbered_text(result.output) == ""
    assert result.data["total_lines"] == 0


async def test_outer_class_symbol_includes_its_nested_class(call, python_file):
    outer = await read(call, path=python_file, symbol="Cart")
    inner = await read(call, path=python_file, symbol="Line")
    qualified = await read(call, path=python_file, symbol="Cart.Line.total")

    assert "class Line:" in outer.output and "return 0" in outer.output
    assert numbered_text(inner.output) == (
        "    class Line:\n        def total(self):\n            return 0"
    )
    assert numbered_text(qualified.output) == "        def total(self):\n            return 0"


async def test_python_file_with_a_syntax_error_still_yields_its_symbols(call, workspace):
    (workspace / "broken.py").write_text("def ok():\n    return 1\n\n\ndef broken(:\n    pass\n")

    result = await read(call, path="broken.py", symbol="ok")

    assert result.ok, result.error
    assert numbered_text(result.output) == "def ok():\n    return 1"


# --- error paths --------------------------------------------------------------------------------


async def test_missing_file_is_an_error_with_similar_names(call, workspace):
    (workspace / "settings.py").write_text("x = 1\n")

    result = await read(call, path="setings.py")

    assert result.error_code == "file_not_found"
    assert "Did you mean settings.py?" in result.error


async def test_directory_is_an_error(call, workspace):
    (workspace / "pkg").mkdir()

    result = await read(call, path="pkg")

    assert result.error_code == "is_a_directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their permissions")
async def test_unreadable_file_is_an_error(call, workspace):
    (workspace / "locked.txt").write_text("x\n")
    (workspace / "locked.txt").chmod(0)

    result = await read(call, path="locked.txt")

    assert result.error_code == "permission_denied"


async def test_binary_file_is_an_error(call, workspace):
    (workspace / "data.bin").write_bytes(b"\x00\x01\x02\x03" * 100)

    result = await read(call, path="data.bin")

    assert result.error_code == "binary_file"


async def test_paths_outside_the_workspace_are_refused(call, workspace, outside):
    (workspace / "docs").symlink_to(outside, target_is_directory=True)

    results = [
        await read(call, path="../outside/secret.txt"),
        await read(call, path=str(outside / "secret.txt")),
        await read(call, path="docs/secret.txt"),
    ]

    assert {r.error_code for r in results} == {"path_outside_workspace"}
    assert all(SECRET.strip() not in r.output for r in results)


# --- line ranges -----------------------------------------------------------------------------------


async def test_end_line_truncates_a_symbol(call, python_file):
    result = await read(call, path=python_file, symbol="Cart", end_line=9)

    assert numbered_text(result.output) == (
        '# Shopping cart.\n# Keeps items in memory.\nclass Cart:\n    """A cart."""'
    )


async def test_start_and_end_line_slice_a_whole_file(call, python_file):
    result = await read(call, path=python_file, start_line=3, end_line=3)

    assert result.output.splitlines()[1:] == ["3\timport functools"]


async def test_range_outside_the_symbol_is_an_error(call, python_file):
    result = await read(call, path=python_file, symbol="my_func", start_line=1, end_line=5)
    reversed_range = await read(call, path=python_file, start_line=9, end_line=3)

    assert result.error_code == "line_out_of_range"
    assert "lines 25-26" in result.error
    assert reversed_range.error_code == "invalid_line_range"


# --- large files -------------------------------------------------------------------------------


async def test_large_file_is_windowed_with_a_note_naming_its_definitions(call, workspace):
    source = "".join(f"def function_{i}():\n    return {i}\n\n\n" for i in range(1500))
    (workspace / "big.py").write_text(source)

    result = await read(call, path="big.py")

    assert result.ok
    assert result.data["windowed"] is True
    last = result.data["lines"][1]
    assert f"Continue with start_line={last + 1}" in result.output
    assert "function_0 (function, lines 1-2)" in result.output
    assert len(result.output) < 10_000
    following = await read(call, path="big.py", start_line=last + 1)
    assert following.data["lines"][0] == last + 1


async def test_large_class_is_windowed_and_lists_its_methods(call, workspace):
    methods = "".join(f"    def method_{i}(self):\n        return {i}\n\n" for i in range(800))
    (workspace / "big.py").write_text(f"class Big:\n{methods}")

    result = await read(call, path="big.py", symbol="Big")

    assert result.data["windowed"] is True
    assert "read one member: Big.method_0 (method, lines 2-3)" in result.output


# --- integration: a symbol read feeds an exact edit ------------------------------------------------


async def test_symbol_text_round_trips_into_str_replace(call, workspace, python_file):
    result = await read(call, path=python_file, symbol="Cart.add")
    old_str = numbered_text(result.output)

    edited = await call(
        "str_replace_editor",
        command="str_replace",
        path=python_file,
        old_str=old_str,
        new_str=old_str.replace("self.items.append(item)", "self.items.insert(0, item)"),
    )

    assert edited.ok, edited.error
    assert (workspace / python_file).read_text() == PYTHON.replace(
        "self.items.append(item)", "self.items.insert(0, item)"
    )


async def test_crlf_and_unicode_files_are_read_without_carriage_returns(call, workspace):
    (workspace / "w.py").write_bytes("def grüß():\r\n    return 'ü'\r\n".encode())

    result = await read(call, path="w.py", symbol="grüß")

    assert numbered_text(result.output) == "def grüß():\n    return 'ü'"
