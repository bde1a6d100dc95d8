"""Symbol extraction: where each function, class, method (and struct, trait, interface ...) of a
source file starts and ends, so `read_file(symbol=...)` can return one definition instead of a
whole file.

Python goes through the stdlib `ast` (exact, and the oracle the tests hold everything else to).
TypeScript, JavaScript, Go, Rust, Java, and C/C++ when their grammar wheel is installed, go through
tree-sitter; the grammars ship inside the `tree-sitter-<language>` wheels, so nothing is downloaded
at run time. A Python file that does not parse (an edit in progress) falls back to
tree-sitter-python, which tolerates syntax errors.

    extract_symbols(source: str, language: str) -> list[SymbolSpan]      (stable interface)

Lines are 1-based and inclusive and count "\\n"-separated lines, like `ast` and every editor.
"""

from __future__ import annotations

import ast
import importlib
import threading
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any

__all__ = [
    "SymbolSpan",
    "UnsupportedLanguageError",
    "extract_symbols",
    "language_for_path",
    "leading_comment_start",
    "supported_languages",
    "supported_languages_phrase",
]

# Kinds that contain other definitions: a function directly inside one of these is a method, and
# the container's name qualifies its members ("Outer.Inner.method").
CONTAINER_KINDS = frozenset(
    {"class", "struct", "interface", "trait", "impl", "enum", "record", "namespace", "module"}
)

NAMESPACE_KINDS = frozenset({"namespace", "module"})

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
}


@dataclass(frozen=True, slots=True)
class SymbolSpan:
    """One definition in a source file.

    `start_line` is the line of the definition itself (the `def`/`class`/`func`/`fn` line, as
    `ast` reports it; for Java the line of the modifiers or type after the annotations);
    `end_line` its last line. `parent` is the qualified name of the enclosing class-like
    container (class, struct/impl, trait, interface, enum, namespace/module), or None at module
    level and for definitions local to a function body (`local=True`).
    `decorated_start_line` is the first line of the decorators / annotations / attributes /
    `export` wrapper that belong to the definition, when they start on an earlier line; None
    otherwise. Every language follows this.

    Where the code names the container itself, that name is the parent: a Go receiver, C++
    `Foo::bar`, JavaScript `Foo.prototype.bar = function` (Foo), `$.fn.bar = ...` ($.fn),
    `this.bar = ...` (the constructor function or class), an object literal's name
    (`const api = {list() {}}` -> api; `$.extend({...})` -> $). `exports.bar = ...` and the
    members of `module.exports = {...}` are functions without a parent. Methods of a Java
    anonymous class have the parent "<anonymous Type>" (`new Type() {...}`) and are local.
    """

    name: str
    kind: str
    start_line: int
    end_line: int
    parent: str | None = None
    decorated_start_line: int | None = None
    local: bool = False

    @property
    def qualified_name(self) -> str:
        return f"{self.parent}.{self.name}" if self.parent else self.name

    @property
    def first_line(self) -> int:
        """First line including decorators / attributes."""
        if self.decorated_start_line is None:
            return self.start_line
        return min(self.decorated_start_line, self.start_line)


class UnsupportedLanguageError(ValueError):
    """No extractor for this language (or its grammar package is not installed)."""


def language_for_path(path: str) -> str | None:
    """The language name `extract_symbols` expects for a file name, or None if unsupported."""
    dot = path.rfind(".")
    if dot < 0 or "/" in path[dot:]:
        return None
    language = EXTENSIONS.get(path[dot:].lower())
    if language is None or language == "python":
        return language
    return language if _tree_sitter_language(language) is not None else None


def supported_languages_phrase() -> str:
    """The supported languages in words, for tool descriptions ("Python, TypeScript, ...")."""
    names = {
        "python": "Python",
        "typescript": "TypeScript",
        "javascript": "JavaScript",
        "go": "Go",
        "rust": "Rust",
        "java": "Java",
        "c": "C",
        "cpp": "C++",
    }
    available = set(supported_languages())
    return ", ".join(label for key, label in names.items() if key in available)


def supported_languages() -> list[str]:
    return sorted({"python"} | {lang for lang in _LANGUAGES if _tree_sitter_language(lang)})


def extract_symbols(source: str, language: str) -> list[SymbolSpan]:
    """Every definition in `source`, in source order. Never raises on malformed source (a parse
    error gives the definitions the parser could recover); raises UnsupportedLanguageError for a
    language it has no extractor for."""
    if language == "python":
        try:
            return _python_symbols_ast(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            if _tree_sitter_language("python") is None:
                return []
            return _tree_sitter_symbols(source, "python")
    if language not in _LANGUAGES:
        raise UnsupportedLanguageError(
            f"no symbol extractor for {language!r}; supported: {', '.join(supported_languages())}"
        )
    return _tree_sitter_symbols(source, language)


def leading_comment_start(lines: list[str], first_line: int, language: str) -> int:
    """Extend a definition upwards over the comment block directly above it (no blank line in
    between): `# ...` for Python, `// ...`, `/// ...`, `/* ... */` and `/** ... */` elsewhere."""
    line = first_line
    python = language == "python"
    while line > 1:
        text = lines[line - 2].strip()
        if not text:
            break
        if python:
            if not text.startswith("#"):
                break
            line -= 1
            continue
        if text.startswith(("//", "/*")) or (text.startswith("*") and not text.startswith("*/")):
            line -= 1
            continue
        if text.endswith("*/"):
            # A block comment whose inner lines need not start with "*": climb to its opener.
            probe = line - 1
            while probe >= 1 and "/*" not in lines[probe - 1]:
                probe -= 1
            if probe < 1:
                break
            line = probe
            continue
        break
    return line


# --- Python through ast ---------------------------------------------------------------------

_STATEMENT_LIST_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _python_symbols_ast(source: str) -> list[SymbolSpan]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not our business
        tree = ast.parse(source)
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


# --- everything else through tree-sitter ------------------------------------------------------


@dataclass(frozen=True)
class _LanguageSpec:
    module: str  # the grammar wheel's import name
    loader: str  # its function returning the language pointer
    query: str  # captures: the definition as @<kind>, its name as @name
    wrappers: frozenset[str] = frozenset()  # parents whose start is the definition's real start
    attached_before: frozenset[str] = frozenset()  # preceding siblings that belong to it


_JS_COMMON = """
(function_declaration name: (identifier) @name) @function
(generator_function_declaration name: (identifier) @name) @function
(method_definition name: (_) @name) @method
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @function
(assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression) (generator_function)]) @function
(pair
  key: [(property_identifier) (string) (number)] @name
  value: [(arrow_function) (function_expression) (generator_function)]) @method
"""

_LANGUAGES: dict[str, _LanguageSpec] = {
    "python": _LanguageSpec(
        "tree_sitter_python",
        "language",
        """
        (function_definition name: (identifier) @name) @function
        (class_definition name: (identifier) @name) @class
        """,
        wrappers=frozenset({"decorated_definition"}),
    ),
    "javascript": _LanguageSpec(
        "tree_sitter_javascript",
        "language",
        _JS_COMMON
        + """
        (class_declaration name: (identifier) @name) @class
        (field_definition
          property: (_) @name
          value: [(arrow_function) (function_expression)]) @method
        """,
        wrappers=frozenset({"export_statement"}),
        attached_before=frozenset({"decorator"}),
    ),
    "typescript": _LanguageSpec(
        "tree_sitter_typescript",
        "language_typescript",
        _JS_COMMON
        + """
        (class_declaration name: (type_identifier) @name) @class
        (abstract_class_declaration name: (type_identifier) @name) @class
        (abstract_method_signature name: (_) @name) @method
        (public_field_definition
          name: (_) @name
          value: [(arrow_function) (function_expression)]) @method
        (interface_declaration name: (type_identifier) @name) @interface
        (method_signature name: (_) @name) @method
        (property_signature
          name: (_) @name
          type: (type_annotation [(function_type) (constructor_type)])) @method
        (type_alias_declaration name: (type_identifier) @name) @type
        (enum_declaration name: (identifier) @name) @enum
        (internal_module name: (_) @name) @namespace
        """,
        wrappers=frozenset({"export_statement"}),
        attached_before=frozenset({"decorator"}),
    ),
    "go": _LanguageSpec(
        "tree_sitter_go",
        "language",
        """
        (function_declaration name: (identifier) @name) @function
        (method_declaration name: (field_identifier) @name) @method
        (type_spec name: (type_identifier) @name) @type
        (type_alias name: (type_identifier) @name) @type
        """,
    ),
    "rust": _LanguageSpec(
        "tree_sitter_rust",
        "language",
        """
        (function_item name: (identifier) @name) @function
        (function_signature_item name: (identifier) @name) @function
        (struct_item name: (type_identifier) @name) @struct
        (union_item name: (type_identifier) @name) @struct
        (enum_item name: (type_identifier) @name) @enum
        (trait_item name: (type_identifier) @name) @trait
        (impl_item type: (_) @name) @impl
        (mod_item name: (identifier) @name) @module
        (macro_definition name: (identifier) @name) @macro
        (type_item name: (type_identifier) @name) @type
        """,
        attached_before=frozenset({"attribute_item"}),
    ),
    "java": _LanguageSpec(
        "tree_sitter_java",
        "language",
        """
        (class_declaration name: (identifier) @name) @class
        (interface_declaration name: (identifier) @name) @interface
        (annotation_type_declaration name: (identifier) @name) @interface
        (enum_declaration name: (identifier) @name) @enum
        (record_declaration name: (identifier) @name) @record
        (method_declaration name: (identifier) @name) @method
        (constructor_declaration name: (identifier) @name) @constructor
        """,
    ),
    "c": _LanguageSpec(
        "tree_sitter_c",
        "language",
        """
        (function_definition declarator: (_) @name) @function
        (struct_specifier name: (type_identifier) @name body: (_)) @struct
        (union_specifier name: (type_identifier) @name body: (_)) @struct
        (enum_specifier name: (type_identifier) @name body: (_)) @enum
        """,
    ),
    "cpp": _LanguageSpec(
        "tree_sitter_cpp",
        "language",
        """
        (function_definition declarator: (_) @name) @function
        (class_specifier name: (_) @name body: (_)) @class
        (struct_specifier name: (_) @name body: (_)) @struct
        (union_specifier name: (_) @name body: (_)) @struct
        (enum_specifier name: (_) @name body: (_)) @enum
        (namespace_definition name: (_) @name) @namespace
        """,
        wrappers=frozenset({"template_declaration"}),
    ),
}
_LANGUAGES["tsx"] = _LanguageSpec(
    "tree_sitter_typescript",
    "language_tsx",
    _LANGUAGES["typescript"].query,
    _LANGUAGES["typescript"].wrappers,
    _LANGUAGES["typescript"].attached_before,
)

# A tree-sitter Parser is not safe to share between threads (tools run in asyncio.to_thread).
_local = threading.local()


@cache
def _tree_sitter_language(language: str) -> tuple[Any, Any] | None:
    """(Language, Query) for a language, or None when its grammar wheel is not installed."""
    spec = _LANGUAGES.get(language)
    if spec is None:
        return None
    try:
        from tree_sitter import Language, Query

        module = importlib.import_module(spec.module)
        lang = Language(getattr(module, spec.loader)())
    except (ImportError, AttributeError, ValueError):
        return None
    return lang, Query(lang, spec.query)


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


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def _symbol_name(node: Any, name_node: Any, language: str) -> tuple[str | None, str | None]:
    """(name, explicit scope) of a definition; the scope is set where the definition names its
    container itself: a Go method's receiver type, a C++ `Foo::bar` definition, JavaScript
    assignments and object literals ("" for none). No name: not a definition to list
    (`module.exports = function () {...}`)."""
    if language == "go" and node.type == "method_declaration":
        receiver = node.child_by_field_name("receiver")
        return _text(name_node), _receiver_type(receiver) if receiver is not None else None
    if language == "rust" and node.type == "impl_item":
        return _base_type_name(name_node), None
    if language in ("c", "cpp") and node.type == "function_definition":
        return _declarator_name(name_node)
    if language in _JS_FAMILY:
        if node.type == "assignment_expression":
            left = node.child_by_field_name("left")
            if "".join(_text(left).split()) in _JS_GLOBAL_OWNERS:  # module.exports = function
                function_name = node.child_by_field_name("right").child_by_field_name("name")
                return (_text(function_name) if function_name else None), ""
            return _text(name_node), _js_owner(left.child_by_field_name("object"))
        if node.type == "pair" or (node.parent is not None and node.parent.type == "object"):
            return _js_key(name_node), _js_object_owner(node.parent)
    if language == "java":
        return _text(name_node), _java_anonymous_owner(node)
    return _text(name_node), None


# --- JavaScript / TypeScript: definitions by assignment and in object literals ------------------

_JS_FAMILY = frozenset({"javascript", "typescript", "tsx"})
# `exports.f = ...`, `window.f = ...`: module-level functions, not members of anything
_JS_GLOBAL_OWNERS = frozenset(
    {"exports", "module.exports", "window", "global", "globalThis", "self"}
)
# `$.extend({...})`, `jQuery.fn.extend({...})`, `_.mixin({...})`: members of the callee's object
_JS_EXTENDERS = frozenset({"extend", "mixin", "assign", "merge", "defaults"})
_JS_WRAPPERS = frozenset(
    {"parenthesized_expression", "as_expression", "satisfies_expression", "non_null_expression"}
)


def _js_key(node: Any) -> str:
    """A property name as written: `foo`, `"foo"` -> foo, `[Symbol.iterator]` as is."""
    text = _text(node)
    if node.type == "string" and len(text) >= 2:
        return text[1:-1]
    return text


THIS = "<this>"


def _js_owner(node: Any | None) -> str | None:
    """The container an assignment target names: `Foo.prototype` -> Foo, `$.fn` -> $.fn,
    `exports` / `module.exports` -> "" (none); THIS for `this` (the enclosing definition
    decides) and "" for anything that is not a dotted name (a call, a subscript ...)."""
    if node is None:
        return ""
    text = "".join(_text(node).split())
    if text == "this":
        return THIS
    parts = [part for part in text.split(".") if part != "prototype"]
    if not parts or not all(part.replace("$", "a").replace("_", "a").isalnum() for part in parts):
        return ""
    owner = ".".join(parts)
    if owner in _JS_GLOBAL_OWNERS:
        return ""
    for exported in ("module.exports.", "exports."):  # `exports.utils.f = ...` -> utils
        if owner.startswith(exported):
            return owner.removeprefix(exported)
    return owner


def _js_object_owner(obj: Any) -> str:
    """The name an object literal is known by: `const api = {...}` -> api, `Foo.prototype = {...}`
    -> Foo, `{ users: {...} }` -> <outer>.users, `$.extend({...})` -> $; "" when it has none
    (`module.exports = {...}`, `export default {...}`, a return value, an argument)."""
    parent = obj.parent
    while parent is not None and parent.type in _JS_WRAPPERS:
        parent = parent.parent
    if parent is None:
        return ""
    if parent.type == "variable_declarator":
        name = parent.child_by_field_name("name")
        return _text(name) if name is not None and name.type == "identifier" else ""
    if parent.type == "assignment_expression":
        return _js_owner(parent.child_by_field_name("left")) or ""
    if parent.type == "pair":
        key = _js_key(parent.child_by_field_name("key"))
        outer = _js_object_owner(parent.parent)
        return f"{outer}.{key}" if outer else key
    if parent.type == "arguments" and parent.parent is not None:
        callee = parent.parent.child_by_field_name("function")
        if callee is None or callee.type != "member_expression":
            return ""
        method = _text(callee.child_by_field_name("property"))
        target = callee.child_by_field_name("object")
        if method not in _JS_EXTENDERS:
            return ""
        if _text(target) == "Object" and parent.named_children:  # Object.assign(target, {...})
            first = parent.named_children[0]
            return "" if first.id == obj.id else (_js_owner(first) or "")
        return _js_owner(target) or ""
    return ""


# --- Java: anonymous classes ------------------------------------------------------------------

ANONYMOUS_PREFIX = "<anonymous"


def _java_anonymous_owner(node: Any) -> str | None:
    """`new Runnable() { public void run() {} }`: run's parent is "<anonymous Runnable>", not
    the class around the expression."""
    body = node.parent
    if body is None or body.type != "class_body":
        return None
    creation = body.parent
    if creation is None or creation.type != "object_creation_expression":
        return None
    type_node = creation.child_by_field_name("type")
    named = _base_type_name(type_node) if type_node is not None else "?"
    if type_node is not None and type_node.type == "generic_type" and type_node.named_children:
        named = _text(type_node.named_children[0])
    return f"{ANONYMOUS_PREFIX} {named}>"


def _receiver_type(receiver: Any) -> str | None:
    for parameter in receiver.named_children:
        type_node = parameter.child_by_field_name("type")
        if type_node is not None:
            return _base_type_name(type_node)
    return None


def _base_type_name(node: Any) -> str:
    """`*Server[T]` -> Server, `Bar<T>` -> Bar, `a::B` -> B."""
    while True:
        if node.type in ("pointer_type", "reference_type"):
            inner = node.child_by_field_name("type") or (
                node.named_children[-1] if node.named_children else None
            )
        elif node.type in ("generic_type", "scoped_type_identifier"):
            inner = node.child_by_field_name("type") or node.child_by_field_name("name")
        else:
            return _text(node)
        if inner is None:
            return _text(node)
        node = inner


def _declarator_name(node: Any) -> tuple[str, str | None]:
    """Drill a C/C++ declarator (pointer, reference, function ...) down to the declared name."""
    while node.type not in (
        "identifier",
        "field_identifier",
        "qualified_identifier",
        "destructor_name",
        "operator_name",
    ):
        inner = node.child_by_field_name("declarator")
        if inner is None:
            named = [child for child in node.named_children if child.type != "parameter_list"]
            if not named:
                return _text(node), None
            inner = named[0]
        node = inner
    if node.type == "qualified_identifier":
        text = _text(node).replace(" ", "")
        scope, _, name = text.rpartition("::")
        return name, scope.replace("::", ".") or None
    return _text(node), None


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
