"""Definitions through tree-sitter: run the language's query, then give each definition its
parent, kind and lines (one loop for every language)."""

from __future__ import annotations

import threading
from typing import Any

from apps.tools.builtin.symbols.languages import _LANGUAGES, _tree_sitter_language
from apps.tools.builtin.symbols.names import ANONYMOUS_PREFIX, THIS, _symbol_name
from apps.tools.builtin.symbols.spans import (
    CONTAINER_KINDS,
    NAMESPACE_KINDS,
    SymbolSpan,
    UnsupportedLanguageError,
)

# A tree-sitter Parser is not safe to share between threads (tools run in asyncio.to_thread).
_local = threading.local()


def _parser(language: str) -> Any:
    from tree_sitter import Parser

    parsers = _local.__dict__.setdefault("parsers", {})
    if language not in parsers:
        loaded = _tree_sitter_language(language)
        assert loaded is not None
        parsers[language] = Parser(loaded[0])
    return parsers[language]


def _tree_sitter_symbols(source: str, language: str) -> list[SymbolSpan]:
    loaded = _tree_sitter_language(language)
    if loaded is None:
        spec = _LANGUAGES[language]
        raise UnsupportedLanguageError(
            f"symbol extraction for {language} needs the {spec.module.replace('_', '-')} package"
        )
    from tree_sitter import QueryCursor

    spec = _LANGUAGES[language]
    tree = _parser(language).parse(source.encode("utf-8", errors="surrogatepass"))
    definitions: dict[int, tuple[Any, Any, str]] = {}  # node id -> (node, name node, kind)
    for _, captures in QueryCursor(loaded[1]).matches(tree.root_node):
        kind = next(key for key in captures if key != "name")
        node = captures[kind][0]
        if node.id not in definitions:
            definitions[node.id] = (node, captures["name"][0], kind)

    qualified: dict[int, str] = {}  # container node id -> its qualified name
    kinds: dict[int, str] = {}
    is_local: dict[int, bool] = {}
    owner_of_this: dict[int, str | None] = {}  # definition node id -> what `this` is inside it
    found: list[SymbolSpan] = []
    # Source order visits every container before its members.
    for node_id, (node, name_node, kind) in sorted(
        definitions.items(), key=lambda item: (item[1][0].start_byte, -item[1][0].end_byte)
    ):
        name, scope = _symbol_name(node, name_node, language)
        enclosing = _enclosing_definition(node, definitions)
        through_this = scope == THIS and enclosing is not None
        if scope == THIS:  # `this.f = function` in a constructor function or a method
            scope = owner_of_this.get(enclosing.id) if enclosing is not None else None
        parent: str | None = None
        local = False
        member = False  # directly inside a class-like container (not a namespace or module)
        if enclosing is not None:
            if kinds[enclosing.id] in CONTAINER_KINDS:
                parent = qualified[enclosing.id]
                local = is_local[enclosing.id]
                member = kinds[enclosing.id] not in NAMESPACE_KINDS
            else:
                local = True
        # The definition names its container itself: Go receivers, C++ `Foo::bar`, JavaScript
        # `Foo.prototype.bar = ...` and object literals; "" says it has none (`exports.x = ...`).
        if scope is not None:
            parent = (f"{parent}.{scope}" if parent and language == "cpp" else scope) or None
            member = bool(scope)
            if scope.startswith(ANONYMOUS_PREFIX):
                local = True  # not reachable by name from outside: not part of an outline
            elif through_this and scope:
                local = is_local[enclosing.id]  # a member of what `this` is, like a method
        if kind == "method" and scope == "":
            kind = "function"  # `module.exports = { f() {} }`: functions, not anyone's methods
        kind = _refine_kind(node, kind, language, member)
        kinds[node_id] = kind
        is_local[node_id] = local
        owner_of_this[node_id] = (
            parent if kind in ("method", "constructor") else f"{parent}.{name}" if parent else name
        )
        if kind in CONTAINER_KINDS:
            qualified[node_id] = f"{parent}.{name}" if parent else name
        span_node = _span_node(node)
        start_row = _declaration_row(span_node)
        outer = span_node
        while outer.parent is not None and outer.parent.type in spec.wrappers:
            outer = outer.parent
        decorated_row = min(outer.start_point[0], span_node.start_point[0])
        sibling = outer.prev_named_sibling
        while sibling is not None and sibling.type in spec.attached_before:
            decorated_row = sibling.start_point[0]
            sibling = sibling.prev_named_sibling
        if name is None:
            continue
        found.append(
            SymbolSpan(
                name=name,
                kind=kind,
                start_line=start_row + 1,
                end_line=_end_row(span_node, language) + 1,
                parent=parent,
                decorated_start_line=decorated_row + 1 if decorated_row < start_row else None,
                local=local,
            )
        )
    found.sort(key=lambda s: (s.start_line, -s.end_line))
    return found


def _enclosing_definition(node: Any, definitions: dict[int, tuple[Any, Any, str]]) -> Any:
    ancestor = node.parent
    while ancestor is not None:
        if ancestor.id in definitions:
            return ancestor
        ancestor = ancestor.parent
    return None


def _refine_kind(node: Any, kind: str, language: str, member: bool) -> str:
    if language == "go" and node.type == "type_spec":
        type_node = node.child_by_field_name("type")
        if type_node is not None and type_node.type == "struct_type":
            return "struct"
        if type_node is not None and type_node.type == "interface_type":
            return "interface"
        return "type"
    if kind == "function" and member:
        return "method"
    return kind


def _span_node(node: Any) -> Any:
    """The node whose lines are the definition's: `const f = () => ...` spans its whole
    declaration statement, a lone Go `type X struct` spans the `type` keyword."""
    parent = node.parent
    if parent is None:
        return node
    if node.type == "variable_declarator" and parent.type in (
        "lexical_declaration",
        "variable_declaration",
    ):
        declarators = [c for c in parent.named_children if c.type == "variable_declarator"]
        return parent if len(declarators) == 1 else node
    if node.type == "assignment_expression" and parent.type == "expression_statement":
        return parent
    if node.type == "type_spec" and parent.type == "type_declaration":
        specs = [c for c in parent.named_children if c.type == "type_spec"]
        return parent if len(specs) == 1 else node
    return node


# Children a definition may start with that are not the declaration itself: decorators of a
# TypeScript field, Java annotations (inside `modifiers`), comments between them.
_ATTACHED_CHILDREN = frozenset(
    {"decorator", "marker_annotation", "annotation", "comment", "line_comment", "block_comment"}
)


def _declaration_row(node: Any) -> int:
    """The row of the declaration itself, after the decorators / annotations the node starts
    with (`@Override` / `public int compare(...)` -> the row of `public`)."""
    child = node.child(0)
    while child is not None:
        if child.type == "modifiers":
            inner = child.child(0)
            while inner is not None:
                if inner.type not in _ATTACHED_CHILDREN:
                    return inner.start_point[0]
                inner = inner.next_sibling
        elif child.type not in _ATTACHED_CHILDREN:
            return child.start_point[0]
        child = child.next_sibling
    return node.start_point[0]


def _end_row(node: Any, language: str) -> int:
    if language != "python":
        return node.end_point[0]
    # tree-sitter-python keeps comments after the last statement inside the block; ast ends the
    # definition at its last statement. Follow the last non-comment child down to a leaf.
    while node.child_count:
        children = [c for c in node.children if c.type != "comment"]
        if not children:
            break
        node = children[-1]
    return node.end_point[0]
