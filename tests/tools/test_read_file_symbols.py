"""read_file with a symbol (seed 002 U1): class, function and method slices with their comments,
decorators and docstrings in Python, TypeScript, Go, JavaScript, Rust and Java; nested classes
and files with syntax errors; unknown, misspelled, ambiguous and unsupported symbols; and the
round trip of a symbol's text into str_replace."""

from __future__ import annotations

import textwrap

import pytest

from tests.tools.conftest import numbered_text
from tests.tools.read_file_support import PYTHON, read

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


# --- symbol slices per language ---------------------------------------------------------------


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


# --- nested classes and broken files ----------------------------------------------------------


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


# --- unknown, ambiguous and unsupported symbols -----------------------------------------------


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


# --- integration: a symbol read feeds an exact edit -------------------------------------------


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
