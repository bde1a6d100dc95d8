"""A definition's name and, where the code names it, its container: Go receivers, C++
`Foo::bar`, Rust impls, JavaScript assignments and object literals, Java anonymous classes."""

from __future__ import annotations

from typing import Any


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
