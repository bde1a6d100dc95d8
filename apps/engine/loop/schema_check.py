"""A fast, conservative check of tool arguments against a tool's JSON Schema.

`compile_check(schema)` turns the schema into a plain-Python predicate once, when the tool class
is created; the predicate runs on every tool call. It answers True only when the arguments are
certainly valid under Draft 2020-12; False means "not proven": the caller then runs the full
jsonschema validator, which decides and writes the error message (tools.py). So the result of
validation, and every error the model sees, are the full validator's; this only skips it for the
common case of valid arguments (a validator pass costs ~8 µs, this under 1 µs).

Understood keywords: type, properties, required, additionalProperties (a boolean), items (one
schema), minItems, maxItems, minLength, maxLength, minimum, maximum, exclusiveMinimum,
exclusiveMaximum, enum (of strings), and annotations (description, title, ...). A schema with any
other keyword compiles to None: its tool is always checked by the full validator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset(
    {"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
     "writeOnly"}
)  # fmt: skip
# type name -> a test that never says yes where jsonschema says no (exact types: an int
# subclass, or 1.0 for "integer", goes to the full validator)
TYPES: dict[str, Check] = {
    "string": lambda value: type(value) is str,
    "integer": lambda value: type(value) is int,
    "number": lambda value: type(value) is int or type(value) is float,
    "boolean": lambda value: type(value) is bool,
    "null": lambda value: value is None,
    "object": lambda value: type(value) is dict,
    "array": lambda value: type(value) is list,
}
OBJECT_KEYWORDS = frozenset({"properties", "required", "additionalProperties"})
ARRAY_KEYWORDS = frozenset({"items", "minItems", "maxItems"})
STRING_KEYWORDS = frozenset({"minLength", "maxLength"})
NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
KNOWN = (ANNOTATIONS | OBJECT_KEYWORDS | ARRAY_KEYWORDS | STRING_KEYWORDS | NUMBER_KEYWORDS) | {
    "type",
    "enum",
}


class Unsupported(Exception):
    """The schema uses something this checker does not prove: use the full validator."""


def compile_check(schema: Any) -> Check | None:
    """The fast predicate for `schema`, or None when the schema is outside the understood subset."""
    try:
        return _compile(schema)
    except Unsupported:
        return None


def _number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _compile(schema: Any) -> Check:
    if schema is True or schema == {}:
        return lambda value: True
    if not isinstance(schema, dict) or not set(schema) <= KNOWN:
        raise Unsupported
    if schema.get("type") == "object" and set(schema) - ANNOTATIONS - {"type"} <= OBJECT_KEYWORDS:
        return _object_check(schema, strict=True)  # a tool's usual schema: one function
    checks: list[Check] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not names or any(not isinstance(name, str) or name not in TYPES for name in names):
            raise Unsupported
        tests = [TYPES[name] for name in names]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    elif set(schema) - ANNOTATIONS:
        raise Unsupported  # constraints without a type: leave them to the full validator
    if "enum" in schema:
        values = schema["enum"]
        if not isinstance(values, list) or not all(type(each) is str for each in values):
            raise Unsupported
        allowed = frozenset(values)
        checks.append(lambda value: type(value) is str and value in allowed)
    checks += _string_checks(schema) + _number_checks(schema)
    checks += _array_checks(schema) + _object_checks(schema)
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the usual shape (a type and its keywords): no generator per call
        first, second = checks
        return lambda value: first(value) and second(value)
    return lambda value: all(check(value) for check in checks)


def _string_checks(schema: dict) -> list[Check]:
    low, high = _bound(schema, "minLength"), _bound(schema, "maxLength")
    if low is None and high is None:
        return []
    low, high = low or 0, high if high is not None else float("inf")
    return [lambda value: type(value) is not str or low <= len(value) <= high]


def _number_checks(schema: dict) -> list[Check]:
    checks: list[Check] = []
    for keyword in NUMBER_KEYWORDS & set(schema):
        limit = schema[keyword]
        if not _number(limit):
            raise Unsupported
        test = {
            "minimum": lambda value, limit=limit: value >= limit,
            "maximum": lambda value, limit=limit: value <= limit,
            "exclusiveMinimum": lambda value, limit=limit: value > limit,
            "exclusiveMaximum": lambda value, limit=limit: value < limit,
        }[keyword]
        checks.append(lambda value, test=test: not _number(value) or test(value))
    return checks


def _array_checks(schema: dict) -> list[Check]:
    if not ARRAY_KEYWORDS & set(schema):
        return []
    item = _compile(schema["items"]) if "items" in schema else None
    low, high = _bound(schema, "minItems"), _bound(schema, "maxItems")
    low, high = low or 0, high if high is not None else float("inf")

    def check(value: Any) -> bool:
        if type(value) is not list:
            return True
        if not low <= len(value) <= high:
            return False
        return item is None or all(item(each) for each in value)

    return [check]


def _object_checks(schema: dict) -> list[Check]:
    return [_object_check(schema)] if OBJECT_KEYWORDS & set(schema) else []


def _object_check(schema: dict, *, strict: bool = False) -> Check:
    """The object keywords' check; `strict`: the schema's type is "object" (and this is its
    only check): anything but a dict fails it, as the type check would."""
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list):
        raise Unsupported
    if not isinstance(extra, bool) or not all(isinstance(name, str) for name in required):
        raise Unsupported
    subchecks = {name: _compile(sub) for name, sub in properties.items()}
    needed, closed = tuple(required), not extra

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return not strict
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            sub = subchecks.get(name)
            if sub is None:
                if closed:
                    return False
            elif not sub(item):
                return False
        return True

    return check


def _bound(schema: dict, keyword: str) -> int | None:
    if keyword not in schema:
        return None
    value = schema[keyword]
    if type(value) is not int or value < 0:
        raise Unsupported
    return value
