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

Layout: `spans` (SymbolSpan, kinds), `python_ast`, `languages` (grammar + query per language),
`tree_sitter` (the one loop that turns query matches into spans), `names` (names and containers
the code spells out: receivers, `Foo::bar`, JavaScript assignments, Java anonymous classes).
"""

from __future__ import annotations

from apps.tools.builtin.symbols.languages import _LANGUAGES, _tree_sitter_language
from apps.tools.builtin.symbols.python_ast import python_symbols
from apps.tools.builtin.symbols.spans import (
    CONTAINER_KINDS,
    EXTENSIONS,
    NAMESPACE_KINDS,
    SymbolSpan,
    UnsupportedLanguageError,
)
from apps.tools.builtin.symbols.tree_sitter import _tree_sitter_symbols

__all__ = [
    "CONTAINER_KINDS",
    "EXTENSIONS",
    "NAMESPACE_KINDS",
    "SymbolSpan",
    "UnsupportedLanguageError",
    "extract_symbols",
    "language_for_path",
    "leading_comment_start",
    "supported_languages",
    "supported_languages_phrase",
]


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
            return python_symbols(source)
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
