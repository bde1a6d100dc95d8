"""extract_symbols: per-language spans, parents and kinds, and agreement with `ast` on every
function and class of the installed Django source tree."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import django
import pytest

from apps.tools.builtin.symbols import (
    SymbolSpan,
    UnsupportedLanguageError,
    _tree_sitter_symbols,
    extract_symbols,
    language_for_path,
    leading_comment_start,
)
from apps.tools.builtin.symbols.python_ast import parse
from tests.support import ROOT


def spans(source: str, language: str) -> list[tuple[str, str, int, int, str | None]]:
    return [
        (s.name, s.kind, s.start_line, s.end_line, s.parent)
        for s in extract_symbols(textwrap.dedent(source), language)
    ]


def test_python_definitions_with_kinds_parents_and_decorators():
    source = textwrap.dedent(
        """\
        import functools

        @functools.total_ordering
        class Outer:
            class Inner:
                async def run(self):
                    def helper():
                        return 1
                    return helper()

            if True:
                def conditional(self):
                    pass

        def top():
            class Local:
                def method(self):
                    pass
        """
    )

    found = extract_symbols(source, "python")

    assert [(s.qualified_name, s.kind, s.start_line, s.end_line, s.local) for s in found] == [
        ("Outer", "class", 4, 13, False),
        ("Outer.Inner", "class", 5, 9, False),
        ("Outer.Inner.run", "method", 6, 9, False),
        ("helper", "function", 7, 8, True),
        ("Outer.conditional", "method", 12, 13, False),
        ("top", "function", 15, 18, False),
        ("Local", "class", 16, 18, True),
        ("Local.method", "method", 17, 18, True),
    ]
    assert found[0].decorated_start_line == 3 and found[0].first_line == 3


def test_typescript_definitions():
    found = spans(
        """\
        export interface Props { name: string }
        export type Id = string;
        export enum Color { Red }
        @Component({})
        export class Widget {
          count = 0;
          handle = (e: Event) => e;
          render(): string { return ""; }
        }
        export const renderComponent = (props: Props) => {
          return props.name;
        };
        function helper() {}
        """,
        "typescript",
    )

    assert found == [
        ("Props", "interface", 1, 1, None),
        ("Id", "type", 2, 2, None),
        ("Color", "enum", 3, 3, None),
        ("Widget", "class", 5, 9, None),
        ("handle", "method", 7, 7, "Widget"),
        ("render", "method", 8, 8, "Widget"),
        ("renderComponent", "function", 10, 12, None),
        ("helper", "function", 13, 13, None),
    ]
    widget = extract_symbols("@Component({})\nexport class Widget {\n}\n", "typescript")[0]
    assert widget.first_line == 1


def test_tsx_and_javascript_definitions():
    tsx = spans("export function App() {\n  return <div>hi</div>;\n}\n", "tsx")
    javascript = spans(
        "class Store {\n  get(k) { return k; }\n}\nconst make = function () {};\n", "javascript"
    )

    assert tsx == [("App", "function", 1, 3, None)]
    assert javascript == [
        ("Store", "class", 1, 3, None),
        ("get", "method", 2, 2, "Store"),
        ("make", "function", 4, 4, None),
    ]


def test_go_methods_take_their_receiver_type_as_parent():
    found = spans(
        """\
        package main

        type Server struct {
        \taddr string
        }

        type Handler interface {
        \tServe()
        }

        func (s *Server) Start() error {
        \treturn nil
        }

        func HandleRequest() {}
        """,
        "go",
    )

    assert found == [
        ("Server", "struct", 3, 5, None),
        ("Handler", "interface", 7, 9, None),
        ("Start", "method", 11, 13, "Server"),
        ("HandleRequest", "function", 15, 15, None),
    ]


def test_rust_impl_and_trait_members_and_attributes():
    source = textwrap.dedent(
        """\
        #[derive(Debug)]
        pub struct Point { x: i32 }

        impl<T> Display for Wrapper<T> {
            fn fmt(&self) {}
        }

        trait Shape {
            fn area(&self) -> f64;
        }

        mod geometry {
            pub fn origin() {}
        }
        """
    )

    found = extract_symbols(source, "rust")

    assert [(s.name, s.kind, s.start_line, s.end_line, s.parent) for s in found] == [
        ("Point", "struct", 2, 2, None),
        ("Wrapper", "impl", 4, 6, None),
        ("fmt", "method", 5, 5, "Wrapper"),
        ("Shape", "trait", 8, 10, None),
        ("area", "method", 9, 9, "Shape"),
        ("geometry", "module", 12, 14, None),
        ("origin", "function", 13, 13, "geometry"),
    ]
    assert found[0].first_line == 1  # the attribute belongs to the struct


def test_java_nested_classes_and_constructors():
    found = spans(
        """\
        public class Outer {
            Outer() {}
            static class Inner {
                int size() { return 0; }
            }
            enum Mode { A; void go() {} }
        }
        """,
        "java",
    )

    assert found == [
        ("Outer", "class", 1, 7, None),
        ("Outer", "constructor", 2, 2, "Outer"),
        ("Inner", "class", 3, 5, "Outer"),
        ("size", "method", 4, 4, "Outer.Inner"),
        ("Mode", "enum", 6, 6, "Outer"),
        ("go", "method", 6, 6, "Outer.Mode"),
    ]


def test_cpp_out_of_class_method_definitions_name_their_class():
    found = spans(
        """\
        namespace app {
        class Cache {
          void clear() {}
          int size();
        };
        int Cache::size() { return 0; }
        }
        static int helper(int a) { return a; }
        """,
        "cpp",
    )

    assert found == [
        ("app", "namespace", 1, 7, None),
        ("Cache", "class", 2, 5, "app"),
        ("clear", "method", 3, 3, "app.Cache"),
        ("size", "method", 6, 6, "app.Cache"),
        ("helper", "function", 8, 8, None),
    ]


def test_c_functions_and_structs():
    found = spans(
        "struct point { int x; };\n\nstatic char *name_of(int id) {\n  return 0;\n}\n", "c"
    )

    assert found == [("point", "struct", 1, 1, None), ("name_of", "function", 3, 5, None)]


def test_languages_are_recognised_by_extension():
    assert language_for_path("src/app.py") == "python"
    assert language_for_path("web/App.TSX") == "tsx"
    assert language_for_path("main.go") == "go"
    assert language_for_path("README.md") is None
    assert language_for_path("Makefile") is None
    assert language_for_path("dir.d/file") is None


def test_unsupported_language_raises():
    with pytest.raises(UnsupportedLanguageError):
        extract_symbols("x", "cobol")


def test_malformed_source_gives_what_can_be_recovered():
    assert [s.name for s in extract_symbols("def ok():\n    pass\n\ndef (:\n", "python")] == ["ok"]
    assert isinstance(extract_symbols("}}}{{{ class", "typescript"), list)  # must not raise
    assert extract_symbols("", "go") == []


def test_leading_comment_blocks_are_included_up_to_a_blank_line():
    lines = [
        "x = 1",
        "",
        "/*",
        " Explains the function",
        "*/",
        "// and more",
        "int f() {}",
    ]
    python = ["import os", "", "# about f", "# more", "def f():", "    pass"]

    assert leading_comment_start(lines, 7, "c") == 3
    assert leading_comment_start(python, 5, "python") == 3
    assert leading_comment_start(python, 1, "python") == 1


def test_symbol_span_qualified_name():
    assert SymbolSpan("m", "method", 1, 2, parent="A.B").qualified_name == "A.B.m"
    assert SymbolSpan("f", "function", 1, 2).qualified_name == "f"


# --- agreement with ast over a real codebase -----------------------------------------------------


def _ast_oracle(source: str) -> tuple[Counter, dict[tuple[str, int], str | None]]:
    """Every function and class as ast sees it, (name, first line, last line), and the class
    directly around each (None at module level and inside function bodies)."""
    definitions: Counter = Counter()
    parents: dict[tuple[str, int], str | None] = {}

    def visit(node: ast.AST, qualified: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                definitions[(child.name, child.lineno, child.end_lineno)] += 1
                parents[(child.name, child.lineno)] = qualified
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{qualified}.{child.name}" if qualified else child.name)
                else:
                    visit(child, None)  # what a function body defines is local, not an attribute
            else:
                visit(child, qualified)

    visit(parse(source), None)  # the oracle takes turns with parses left running elsewhere
    return definitions, parents


@pytest.mark.slow
def test_symbol_extraction_agrees_with_ast_on_the_django_source_tree():
    """extract_symbols (ast) and the tree-sitter-python extractor, which shares its code with
    every other language, both find exactly the definitions ast finds, with the same lines.
    Its cost is this thread's CPU time, not the wall clock: the suite runs in parallel processes
    on a shared machine, where the wall clock measures the neighbours too."""
    started = time.thread_time()
    files = sorted(Path(django.__path__[0]).rglob("*.py"))
    checked = 0
    for path in files:
        source = path.read_text(encoding="utf-8")
        expected, parents = _ast_oracle(source)
        for extractor in (lambda s: extract_symbols(s, "python"), _py_tree_sitter):
            found = extractor(source)
            got = Counter((s.name, s.start_line, s.end_line) for s in found)
            assert got == expected, f"{path}: {sorted((got - expected) + (expected - got))}"
            for span in found:
                assert span.parent == parents[(span.name, span.start_line)], (path, span)
        checked += sum(expected.values())
    assert len(files) > 800 and checked > 10_000
    assert time.thread_time() - started < 30


def _py_tree_sitter(source: str) -> list[SymbolSpan]:
    return _tree_sitter_symbols(source, "python")


# Three threads parse while every garbage collection lets another thread run (a gc callback
# that sleeps): CPython 3.11's AST constructor then fails with SystemError "recursion depth
# mismatch" (gh-106905) unless the parses take turns. In a subprocess: the gc settings stay there.
RACE = """
import ast, gc, sys, threading, time
from apps.tools.builtin.symbols.python_ast import parse, python_symbols
source = "\\n".join(f"def f{i}(a):\\n    return [a for _ in range({i})]\\n" for i in range(300))
errors = []
gc.callbacks.append(lambda phase, info: time.sleep(0) if phase == "start" else None)
gc.set_threshold(50)
def work(fn):
    for _ in range(30):
        try:
            fn(source)
        except SystemError as exc:
            errors.append(exc)
            return
for fn in FNS:
    threads = [threading.Thread(target=work, args=(fn,)) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(fn.__name__, len(errors))
    errors.clear()
"""


def _race(fns: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", RACE.replace("FNS", fns)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_python_symbols_hold_when_threads_parse_at_once():
    # the race is real here (plain ast.parse fails), and the extractor's parses take turns
    plain, failures = _race("(ast.parse,)")
    assert plain == "parse" and int(failures) > 0
    assert _race("(parse, python_symbols)") == ["parse", "0", "python_symbols", "0"]
