"""``fbgp-al imports``: the import graph of every product module (``service/``, ``worker/``,
``clients/``), read from the source (nothing is imported), and the rules it keeps.

The modules fall into layers by where they live:

- ``service``: ``service/`` (the API, the store, the loop's rules, the queues);
- ``vocabulary``: ``worker/vocabulary/`` (what a campaign's spec means, which every layer shares:
  inputs and their mapping, pools and designs, defaults);
- ``math``: the other modules of ``worker/`` itself (the GP, NUTS, acquisitions, a refit);
- ``glue``: ``service/jobs/`` (the RQ jobs, their fan-out, a refit's lease, the worker process);
- ``sdk``: the modules of ``clients/`` itself (``pip install fbgp-al``);
- ``tooling``: ``clients/ops/`` and ``clients/reproduction/`` (the ``fbgp-al`` command).

The rules: no module imports itself again through others (no cycle); the vocabulary imports
nothing of the product beyond itself, and no torch; the math imports nothing of the service, the
glue or the clients, nor a queue or web library; the service imports no glue and no clients,
and of ``worker/`` only the vocabulary (the API process never loads torch); the glue imports no
clients; the SDK imports of ``worker/`` only the vocabulary that needs nothing beyond numpy, and
no tooling; only the tooling imports the tooling. So the glue is the one layer below the
tooling that imports both the store and the torch math.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "worker", "clients")
TORCH = {"torch", "pyro", "gpytorch", "numba"}
QUEUE_AND_WEB = {"rq", "redis", "fastapi", "starlette", "httpx", "uvicorn", "prometheus_client"}
SDK_LIBRARIES = {"numpy", "httpx"}


@dataclass
class Graph:
    """Each product module's imports: of product modules (``edges``), and the top-level names
    of the libraries it imports (``libraries``, the standard library left out)."""

    edges: dict[str, set[str]] = field(default_factory=dict)
    libraries: dict[str, set[str]] = field(default_factory=dict)


def module_name(path: Path, root: Path = ROOT) -> str:
    """The name a file of the product is imported by: ``fbgp_al.`` and its path
    (``service/store/runs.py``: ``fbgp_al.service.store.runs``); ``clients/fbgp_al/`` is
    ``fbgp_al`` itself (pyproject.toml's ``package-dir``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return ".".join(["fbgp_al", *(parts[2:] if parts[:2] == ["clients", "fbgp_al"] else parts)])


def layer(module: str) -> str:
    """The layer of ``module`` (see the module's docstring), by where it lives."""
    parts = module.split(".")[1:]  # below fbgp_al
    if not parts:
        return "sdk"
    if parts[0] == "service":
        return "glue" if parts[1:2] == ["jobs"] else "service"
    if parts[0] == "worker":
        return "vocabulary" if parts[1:2] == ["vocabulary"] else "math"
    if parts[1:2] in (["ops"], ["reproduction"]):
        return "tooling"
    return "sdk"


def read(root: Path = ROOT) -> Graph:
    """The graph of every module under ``root``'s product packages."""
    paths = sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))
    modules = {module_name(p, root): p for p in paths}
    graph = Graph()
    for name, path in modules.items():
        edges, libraries = set(), set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for imported in _imported(ast.parse(path.read_text()), package):
            found = _product_module(imported, modules)
            if found is not None:
                edges.add(found)
            elif imported.split(".")[0] not in sys.stdlib_module_names | {"fbgp_al"}:
                libraries.add(imported.split(".")[0])
        edges.discard(name)
        graph.edges[name], graph.libraries[name] = edges, libraries
    return graph


def _imported(tree: ast.AST, package: str) -> Iterable[str]:
    """Every name an import of ``tree`` names (``from a import b``: ``a.b``, which is module
    ``a.b`` or a name in module ``a``; a relative import resolved against ``package``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _product_module(name: str, modules: dict) -> str | None:
    """The product module ``name`` is, or lies in (``a.b.C``, a class of module ``a.b``)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def reach(graph: Graph, module: str) -> set[str]:
    """Every product module that importing ``module`` loads: what it imports, however
    indirectly, and the packages above each (Python runs their ``__init__`` first)."""
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        parts = current.split(".")
        # the packages above (Python runs their __init__ first), but fbgp_al itself, whose
        # __init__ loads the SDK's names lazily, when first used
        todo += [
            ".".join(parts[:k]) for k in range(2, len(parts)) if ".".join(parts[:k]) in graph.edges
        ]
        todo += graph.edges.get(current, ())
    return seen


def libraries_reached(graph: Graph, module: str) -> set[str]:
    return set().union(*(graph.libraries[m] for m in reach(graph, module)))


def cycles(graph: Graph) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan's), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph.edges):
        if node not in index:
            visit(node)
    return sorted(found)


def violations(graph: Graph) -> list[str]:
    """Every arrow against the rules (see the module's docstring), and every cycle."""
    out = [f"cycle: {' <-> '.join(group)}" for group in cycles(graph)]
    for module in sorted(graph.edges):
        mine = layer(module)
        for other in sorted(graph.edges[module]):
            theirs = layer(other)
            why = _arrow_against(graph, mine, other, theirs)
            if why:
                out.append(f"{module} -> {other}: {why}")
        libraries = graph.libraries[module]
        if mine in ("math", "vocabulary") and libraries & QUEUE_AND_WEB:
            out.append(f"{module} imports {sorted(libraries & QUEUE_AND_WEB)}: the math is pure")
        if mine == "vocabulary" and libraries & TORCH:
            out.append(
                f"{module} imports {sorted(libraries & TORCH)}: the vocabulary loads no torch"
            )
        if mine == "service" and libraries & TORCH:
            out.append(f"{module} imports {sorted(libraries & TORCH)}: the API never loads torch")
        if mine == "sdk" and libraries - SDK_LIBRARIES:
            out.append(
                f"{module} imports {sorted(libraries - SDK_LIBRARIES)}: the SDK needs "
                "only httpx and numpy"
            )
    return out


def _arrow_against(graph: Graph, mine: str, other: str, theirs: str) -> str | None:
    if theirs == "tooling" and mine != "tooling":
        return "only the tooling imports the tooling"
    if mine == "vocabulary" and theirs != "vocabulary":
        return "the vocabulary imports nothing of the product beyond itself"
    if mine == "math" and theirs not in ("math", "vocabulary"):
        return "the math imports nothing of the service, the glue or the clients"
    if mine in ("service", "glue") and theirs in ("sdk", "tooling"):
        return "the service and the workers import nothing of the clients"
    if mine == "service" and theirs == "glue":
        return "the service enqueues the jobs by name and never imports them"
    if mine == "service" and theirs == "math":
        return "the service imports of worker/ only the vocabulary (worker/vocabulary/)"
    if mine == "service" and libraries_reached(graph, other) & TORCH:
        return "it loads torch, which the API process never does"
    if mine == "sdk" and theirs != "sdk" and libraries_reached(graph, other) - SDK_LIBRARIES:
        return "the SDK imports of the math only what needs nothing beyond numpy"
    if mine == "sdk" and theirs in ("service", "glue", "math"):
        return "the SDK imports of the service and the workers only the vocabulary"
    return None


def render(graph: Graph) -> str:
    """The graph as text: each module, its layer, and what it imports."""
    width = max(len(m) for m in graph.edges)
    lines = []
    for module in sorted(graph.edges):
        imports = ", ".join(sorted(graph.edges[module])) or "-"
        lines.append(f"{module:<{width}}  [{layer(module)}] -> {imports}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fbgp-al imports", description=__doc__.split("\n")[0])
    parser.add_argument("--dot", action="store_true", help="as Graphviz's dot")
    args = parser.parse_args(argv)
    graph = read()
    if args.dot:
        print("digraph imports {")
        for module in sorted(graph.edges):
            for other in sorted(graph.edges[module]):
                print(f'  "{module}" -> "{other}";')
        print("}")
    else:
        print(render(graph))
    wrong = violations(graph)
    for line in wrong:
        print(f"against the rules: {line}", file=sys.stderr)
    return 1 if wrong else 0
