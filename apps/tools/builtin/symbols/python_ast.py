"""Python definitions through the stdlib `ast`: exact, and the oracle the tests hold the
tree-sitter extractors to."""

from __future__ import annotations

import ast
import threading
import warnings

from apps.tools.builtin.symbols.spans import SymbolSpan

_STATEMENT_LIST_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")
# CPython 3.11 keeps the AST constructor's recursion depth in state shared by the interpreter's
# threads: when a thread switch (a garbage collection running Python code) lets a second thread
# parse while the first builds its tree, one of them fails with SystemError "AST constructor
# recursion depth mismatch" (python/cpython gh-106905). Repository maps are built in worker
# threads side by side, so parses take turns; parsing holds the GIL anyway. Code this lock does
# not cover can still build an AST meanwhile (a module compiled from source as another thread
# imports it): the constructor sets the depth afresh at every call, so a parse that lost that
# race is simply parsed again (at most _RACE_TRIES times).
_PARSING = threading.Lock()
_RACE = "AST constructor recursion depth mismatch"
_RACE_TRIES = 3


def parse(source: str) -> ast.Module:
    """ast.parse, one thread at a time (see _PARSING); SyntaxWarnings silenced."""
    with _PARSING, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not our business
        for attempt in range(1, _RACE_TRIES + 1):
            try:
                return ast.parse(source)
            except SystemError as exc:
                if _RACE not in str(exc) or attempt == _RACE_TRIES:
                    raise
        raise AssertionError("unreachable")


def python_symbols(source: str) -> list[SymbolSpan]:
    tree = parse(source)
    found: list[SymbolSpan] = []

    def visit(node: ast.AST, class_name: str | None, local: bool) -> None:
        # Definitions only live in statement lists, so walking those (not expressions) finds all
        # of them and stays shallow even on huge expressions.
        for field in _STATEMENT_LIST_FIELDS:
            for child in getattr(node, field, None) or ():
                if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    is_class = isinstance(child, ast.ClassDef)
                    decorators = [d.lineno for d in child.decorator_list]
                    found.append(
                        SymbolSpan(
                            name=child.name,
                            kind="class" if is_class else ("method" if class_name else "function"),
                            start_line=child.lineno,
                            end_line=child.end_lineno or child.lineno,
                            parent=class_name,
                            decorated_start_line=min(decorators) if decorators else None,
                            local=local,
                        )
                    )
                    if is_class:
                        qualified = f"{class_name}.{child.name}" if class_name else child.name
                        visit(child, qualified, local)
                    else:
                        visit(child, None, True)
                else:
                    visit(child, class_name, local)

    visit(tree, None, False)
    found.sort(key=lambda s: (s.start_line, -s.end_line))
    return found
