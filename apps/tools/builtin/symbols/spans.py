"""What a definition is: `SymbolSpan`, the kinds that contain others, file extensions."""

from __future__ import annotations

from dataclasses import dataclass

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
