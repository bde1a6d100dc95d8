"""extract_symbols and read_file(symbol=...) on code written the way real libraries write it:
JavaScript definitions by assignment and in object literals (lodash, Express, jQuery), TypeScript
interface members, Spring-style annotated Java, anonymous classes; and `SymbolSpan`'s
start_line / decorated_start_line contract in every language."""

from __future__ import annotations

import textwrap

import pytest

from apps.tools.builtin.symbols import _tree_sitter_symbols, extract_symbols
from tests.tools.conftest import numbered_text


def spans(source: str, language: str) -> list[tuple[str, str, int, int, str | None]]:
    return [
        (s.name, s.kind, s.start_line, s.end_line, s.parent)
        for s in extract_symbols(textwrap.dedent(source), language)
    ]


LODASH_STYLE = """\
;(function() {
  var undefined;

  /** Creates a lodash object. */
  function lodash(value) {
    return new LodashWrapper(value);
  }

  function chunk(array, size) {
    return [array, size];
  }

  lodash.chunk = chunk;
  lodash.compact = function compact(array) {
    return array.filter(Boolean);
  };
  lodash.identity = (value) => value;
  lodash.prototype.value = function() {
    return this.__wrapped__;
  };
  exports.debounce = function(func, wait) {
    return func;
  };
  module.exports.throttle = async function throttle(func) {};
}.call(this));
"""


def test_lodash_style_assignments_are_definitions():
    assert spans(LODASH_STYLE, "javascript") == [
        ("lodash", "function", 5, 7, None),
        ("chunk", "function", 9, 11, None),
        ("compact", "method", 14, 16, "lodash"),
        ("identity", "method", 17, 17, "lodash"),
        ("value", "method", 18, 20, "lodash"),
        ("debounce", "function", 21, 23, None),
        ("throttle", "function", 24, 24, None),
    ]


EXPRESS_STYLE = """\
'use strict';

var proto = module.exports = function(options) {
  return router;
};
exports = module.exports = function createServer() {};

function Layer(path, options, fn) {
  this.handle = fn;
  this.match = function match(path) {
    return path === this.path;
  };
}

Layer.prototype.handle_request = function handle(req, res, next) {
  var fn = this.handle;
  fn(req, res, next);
};

Router.prototype.route = function route(path) {
  return new Route(path);
};

module.exports = {
  createApplication() {
    return app;
  },
  'json': function json(options) {},
  urlencoded: (options) => options,
};
"""


def test_express_style_prototype_methods_this_members_and_module_exports():
    assert spans(EXPRESS_STYLE, "javascript") == [
        ("createServer", "function", 6, 6, None),
        ("Layer", "function", 8, 13, None),
        ("match", "method", 10, 12, "Layer"),
        ("handle_request", "method", 15, 18, "Layer"),
        ("route", "method", 20, 22, "Router"),
        ("createApplication", "function", 25, 27, None),
        ("json", "function", 28, 28, None),
        ("urlencoded", "function", 29, 29, None),
    ]


JQUERY_STYLE = """\
jQuery.fn.extend({
  addClass: function(value) {
    return this;
  },
  removeClass(value) {
    return this;
  },
  toggleClass: (value, stateVal) => this,
});

jQuery.extend({
  isPlainObject: function(obj) {
    return true;
  },
});

Object.assign(EventEmitter.prototype, {
  emit: function(type) {},
});

const api = {
  users: {
    list: async () => [],
    get: function(id) {},
  },
  [Symbol.iterator]() {},
};
"""


def test_object_literal_methods_take_the_name_of_their_object():
    assert spans(JQUERY_STYLE, "javascript") == [
        ("addClass", "method", 2, 4, "jQuery.fn"),
        ("removeClass", "method", 5, 7, "jQuery.fn"),
        ("toggleClass", "method", 8, 8, "jQuery.fn"),
        ("isPlainObject", "method", 12, 14, "jQuery"),
        ("emit", "method", 18, 18, "EventEmitter"),
        ("list", "method", 23, 23, "api.users"),
        ("get", "method", 24, 24, "api.users"),
        ("[Symbol.iterator]", "method", 26, 26, "api"),
    ]


def test_this_members_in_a_class_constructor_belong_to_the_class():
    source = "class Button {\n  constructor() {\n    this.onClick = () => {};\n  }\n}\n"

    assert spans(source, "javascript") == [
        ("Button", "class", 1, 5, None),
        ("constructor", "method", 2, 4, "Button"),
        ("onClick", "method", 3, 3, "Button"),
    ]


def test_typescript_assignments_and_object_literals_work_as_in_javascript():
    source = (
        "export const handlers = {\n  onSave(event: Event): void {},\n};\n"
        "Store.prototype.reset = function (): void {};\n"
    )

    assert spans(source, "typescript") == [
        ("onSave", "method", 2, 2, "handlers"),
        ("reset", "method", 4, 4, "Store"),
    ]


TS_INTERFACES = """\
export interface Repository<T, ID> {
  findById(id: ID): Promise<T | undefined>;
  save(entity: T): Promise<T>;
  readonly onChange: (entity: T) => void;
  factory?: new (id: ID) => T;
  count: number;
}

interface Logger {
  log(message: string, ...rest: unknown[]): void;
}
"""


def test_typescript_interface_method_signatures_and_function_properties():
    assert spans(TS_INTERFACES, "typescript") == [
        ("Repository", "interface", 1, 7, None),
        ("findById", "method", 2, 2, "Repository"),
        ("save", "method", 3, 3, "Repository"),
        ("onChange", "method", 4, 4, "Repository"),
        ("factory", "method", 5, 5, "Repository"),
        ("Logger", "interface", 9, 11, None),
        ("log", "method", 10, 10, "Logger"),
    ]


SPRING_STYLE = """\
package com.example.orders;

@RestController
@RequestMapping("/orders")
public class OrderController {

    @Autowired
    private OrderService service;

    @Autowired
    public OrderController(OrderService service) {
        this.service = service;
    }

    @GetMapping("/{id}")
    @ResponseStatus(HttpStatus.OK)
    public Order get(@PathVariable long id) {
        return service.find(id);
    }

    @Override public String toString() { return "orders"; }

    private final Comparator<Order> byDate = new Comparator<Order>() {
        @Override
        public int compare(Order a, Order b) {
            return a.date().compareTo(b.date());
        }
    };

    void schedule(Executor executor) {
        executor.execute(new Runnable() {
            public void run() {
                service.expire();
            }
        });
    }
}
"""


def test_java_start_line_is_the_declaration_and_annotations_are_decorated_start_line():
    found = {s.qualified_name: s for s in extract_symbols(SPRING_STYLE, "java")}

    controller = found["OrderController"]
    assert (controller.start_line, controller.decorated_start_line) == (5, 3)
    constructor = found["OrderController.OrderController"]
    assert (constructor.start_line, constructor.decorated_start_line) == (11, 10)
    get = found["OrderController.get"]
    assert (get.start_line, get.end_line, get.decorated_start_line) == (17, 19, 15)
    same_line = found["OrderController.toString"]
    assert (same_line.start_line, same_line.decorated_start_line) == (21, None)


def test_java_anonymous_class_methods_are_not_members_of_the_enclosing_class():
    found = extract_symbols(SPRING_STYLE, "java")
    by_name = {s.name: s for s in found}

    assert by_name["compare"].parent == "<anonymous Comparator>"
    assert by_name["compare"].local is True
    assert (by_name["compare"].start_line, by_name["compare"].decorated_start_line) == (25, 24)
    assert by_name["run"].parent == "<anonymous Runnable>"
    assert by_name["run"].local is True
    assert {s.qualified_name for s in found if s.parent == "OrderController"} == {
        "OrderController.OrderController",
        "OrderController.get",
        "OrderController.toString",
        "OrderController.schedule",
    }


@pytest.mark.parametrize(
    ("language", "source", "name", "start", "decorated"),
    [
        ("python", "@app.route('/')\n@login_required\ndef index():\n    pass\n", "index", 3, 1),
        (
            "python",
            "class A:\n    @property\n    def size(self):\n        return 1\n",
            "size",
            3,
            2,
        ),
        ("typescript", "@Injectable()\nexport class Api {}\n", "Api", 2, 1),
        ("typescript", "class A {\n  @Input()\n  name = () => 1;\n}\n", "name", 3, 2),
        ("typescript", "class A {\n  @HostListener('x')\n  onX() {}\n}\n", "onX", 3, 2),
        ("java", "class A {\n  @Override\n  @Deprecated\n  void f() {}\n}\n", "f", 4, 2),
        ("java", "@Entity\nclass A {}\n", "A", 2, 1),
        ("rust", "#[derive(Debug)]\n#[serde(default)]\nstruct S {}\n", "S", 3, 1),
        ("go", "// F does it.\nfunc F() {}\n", "F", 2, None),
    ],
)
def test_start_line_is_the_definition_and_decorated_start_line_its_first_decorator(
    language, source, name, start, decorated
):
    extractors = [lambda s: extract_symbols(s, language)]
    if language == "python":  # the tree-sitter fallback for unparsable Python too
        extractors.append(lambda s: _tree_sitter_symbols(s, "python"))
    for extractor in extractors:
        span = next(s for s in extractor(source) if s.name == name)

        assert (span.start_line, span.decorated_start_line) == (start, decorated)


# --- read_file finds them ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "source", "symbol", "first", "last"),
    [
        ("lodash.js", LODASH_STYLE, "compact", 14, 16),
        ("lodash.js", LODASH_STYLE, "lodash.prototype.value", 18, 20),
        ("lodash.js", LODASH_STYLE, "debounce", 21, 23),
        ("router.js", EXPRESS_STYLE, "Layer.prototype.handle_request", 15, 18),
        ("router.js", EXPRESS_STYLE, "createApplication", 25, 27),
        ("jquery.js", JQUERY_STYLE, "jQuery.fn.addClass", 2, 4),
        ("jquery.js", JQUERY_STYLE, "api.users.list", 23, 23),
        ("repo.ts", TS_INTERFACES, "Repository.findById", 2, 2),
        ("OrderController.java", SPRING_STYLE, "OrderController.get", 15, 19),
    ],
)
async def test_read_file_finds_real_style_definitions(
    call, workspace, name, source, symbol, first, last
):
    (workspace / name).write_text(source)

    result = await call("read_file", path=name, symbol=symbol)

    assert result.ok, result.error
    expected = "\n".join(source.split("\n")[first - 1 : last])
    assert numbered_text(result.output) == expected


async def test_read_file_does_not_offer_anonymous_class_methods_as_class_members(call, workspace):
    (workspace / "OrderController.java").write_text(SPRING_STYLE)

    member = await call("read_file", path="OrderController.java", symbol="OrderController.run")
    by_name = await call("read_file", path="OrderController.java", symbol="run")

    assert member.error_code == "symbol_not_found"
    assert "OrderController.run" not in member.data["available"]
    assert not any("anonymous" in name for name in member.data["available"])
    assert by_name.ok
    assert by_name.data["symbol"]["name"] == "<anonymous Runnable>.run"
