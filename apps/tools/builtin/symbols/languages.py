"""The tree-sitter side of each language: its grammar wheel and the query that captures its
definitions (@<kind> and @name)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from typing import Any


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
