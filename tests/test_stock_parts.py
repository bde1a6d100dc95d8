"""Stock parts (issue 29): the project neither imports a dependency's private names nor replaces
a dependency's attributes, so an ordinary upgrade of a dependency cannot break it silently.

Checked two ways: statically over the project's source (imports of `x._y`, assignments to an
attribute of an imported third-party module, access to the channels_redis internals once used),
and at run time after the serving stack's start-up (asgi.py) — Twisted's and autobahn's
functions are their own."""

from __future__ import annotations

import ast
import pprint
import sys
from pathlib import Path

from apps.tools.builtin.symbols.python_ast import parse  # ast.parse that survives gh-106905

ROOT = Path(__file__).resolve().parent.parent

# The standard library is no dependency (the engine's own uses of its private names are the
# architecture issue's); what is checked is the third-party packages.
OURS = {"apps", "agentkit_site", "tests", "bench", "__future__", *sys.stdlib_module_names}
# Public, documented attributes of a dependency's objects that Django asks projects to set.
ALLOWED_ASSIGNMENTS = {"admin.site.enable_nav_sidebar"}
SOURCES = ["apps", "agentkit_site", "bench"]
# channels_redis internals a former channel_layer.py/group_publish.py used
KNOWN_INTERNALS = {"_get_layer", "_get_shard", "_get_group_channel_name", "_ensure_redis"}


def _private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def violations(source: str, where: str) -> list[str]:
    tree = parse(source)
    found: list[str] = []
    foreign: set[str] = set()  # names bound to third-party modules or their members
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in OURS:
                continue
            if _private(node.module):
                found.append(f"{where}:{node.lineno}: imports private module {node.module}")
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{where}:{node.lineno}: imports private {alias.name}")
                foreign.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OURS:
                    continue
                if _private(alias.name):
                    found.append(f"{where}:{node.lineno}: imports private module {alias.name}")
                foreign.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            root = target
            while isinstance(root, ast.Attribute):
                root = root.value
            if (
                isinstance(target, ast.Attribute)
                and isinstance(root, ast.Name)
                and root.id in foreign
                and ast.unparse(target) not in ALLOWED_ASSIGNMENTS
            ):
                found.append(f"{where}:{node.lineno}: assigns to {root.id}'s attribute")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in foreign
        ):
            found.append(f"{where}:{node.lineno}: setattr on {node.args[0].id}")
        if isinstance(node, ast.Attribute) and node.attr in KNOWN_INTERNALS:
            found.append(f"{where}:{node.lineno}: uses channels_redis's {node.attr}")
        for target in targets:  # obj._name = ... on anything but our own self/cls
            if (
                isinstance(target, ast.Attribute)
                and _private(target.attr)
                and not (isinstance(target.value, ast.Name) and target.value.id in {"self", "cls"})
            ):
                found.append(f"{where}:{node.lineno}: sets private {ast.unparse(target)}")
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in {"importlib.import_module", "import_module"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            modules = [node.args[0].value]
        elif isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List)):
            # for module in ("a", "b._c"): importlib.import_module(module)
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            imports = any(ast.unparse(c.func).endswith("import_module") for c in calls)
            modules = [e.value for e in node.iter.elts if isinstance(e, ast.Constant) and imports]
        else:
            modules = []
        for module in modules:
            if isinstance(module, str) and module.split(".")[0] not in OURS and _private(module):
                found.append(f"{where}:{node.lineno}: imports private module {module}")
    return found


def test_the_checker_finds_each_kind_of_patch():
    """The checks below can fail: each former patch, as it was written, is reported."""
    former = "\n".join(
        [
            "from httpcore._utils import is_socket_readable",
            "from twisted.internet import tcp",
            "from autobahn.websocket import protocol",
            "tcp.Connection.write = write_at_once(tcp.Connection.write)",
            "protocol.pformat = repr",
            "layer = self._get_layer()",
            "import rq._private",
            'scope["user"]._wrapped = user',
            'for module in ("httpcore", "anyio._backends._asyncio"):\n    importlib.import_module(module)',
        ]
    )
    found = violations(former, "former.py")
    assert len(found) == 7, found
    assert violations("from channels.layers import get_channel_layer\nx = 1\n", "ok.py") == []


def test_no_module_of_the_project_patches_or_reaches_into_a_dependency():
    found = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            found += violations(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []


def test_the_serving_stack_runs_as_shipped():
    from autobahn.websocket import protocol
    from twisted.internet import tcp

    import agentkit_site.asgi  # noqa: F401  (what Daphne loads)

    assert protocol.pformat is pprint.pformat
    assert "write" not in vars(tcp.Connection)  # Twisted's inherited write, not a replacement
    assert not getattr(tcp.Connection.write, "at_once", False)


# What the engine once used to save a microsecond a step (issue 31): CPython's C JSON encoder
# made by hand, asyncio's task dict, slot descriptors set by hand instead of an initializer.
ENGINE_SHORTCUTS = {"c_make_encoder", "_current_tasks", "__set__"}


def engine_shortcuts(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in {"apps", "__future__"}:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{where}:{node.lineno}: imports private {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in ENGINE_SHORTCUTS:
            found.append(f"{where}:{node.lineno}: uses {node.attr}")
    return found


def test_the_engine_takes_no_shortcut_through_the_standard_librarys_private_parts():
    former = "\n".join(
        [
            "from asyncio.tasks import _current_tasks",
            "encoder = json.encoder.c_make_encoder(None)",
            "_set_dict = BaseModel.__dict__['__dict__'].__set__",
        ]
    )
    assert len(engine_shortcuts(former, "former.py")) == 3
    found = []
    for path in sorted((ROOT / "apps" / "engine").rglob("*.py")):
        found += engine_shortcuts(path.read_text(), str(path.relative_to(ROOT)))
    assert found == []
