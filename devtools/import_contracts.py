"""An import-linter contract type: no import cycle between the modules of the given packages.

`acyclic_siblings` (built in) looks at siblings with their descendants squashed together; this
one looks at single modules, counting every import grimp sees (function-level and TYPE_CHECKING
ones included), so `a -> b -> a` is a cycle wherever a and b live inside `containers`.

    [tool.importlinter]
    contract_types = ["acyclic_modules: devtools.import_contracts.AcyclicModulesContract"]
"""

from __future__ import annotations

from importlinter import Contract, ContractCheck, fields, output


def strongly_connected(adjacency: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one module that import each other, directly or not (Tarjan,
    iterative so a deep import chain cannot hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(sorted(adjacency[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(adjacency[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return sorted(groups)


class AcyclicModulesContract(Contract):
    """containers: the packages whose modules (all of their descendants) must not import each
    other in a circle."""

    containers = fields.ListField(subfield=fields.StringField())

    def check(self, graph, verbose: bool) -> ContractCheck:
        modules: set[str] = set()
        for container in self.containers:  # type: ignore[attr-defined]
            modules |= {container} | graph.find_descendants(container)
        adjacency = {
            module: graph.find_modules_directly_imported_by(module) & modules for module in modules
        }
        cycles = strongly_connected(adjacency)
        details = {
            tuple(group): [
                f"{importer} -> {imported}"
                for importer in group
                for imported in sorted(adjacency[importer] & set(group))
            ]
            for group in cycles
        }
        return ContractCheck(kept=not cycles, metadata={"cycles": details})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for group, imports in check.metadata["cycles"].items():
            output.print_error(f"These {len(group)} modules import each other in a circle:")
            for line in imports:
                output.print_error(f"    {line}", bold=False)
            output.new_line()
        output.print("Break each circle where the code has a seam: move what both need lower down.")
