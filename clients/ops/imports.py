"""``fbgp-al imports``: the import graph of every product module (``service/``, ``worker/``,
``clients/``), read from the source (nothing is imported), and the rules it keeps.

Three packages, whose arrows go one way (:data:`PACKAGE_ARROWS`): ``worker`` imports nothing of
the product beyond itself, ``service`` imports ``worker``, ``clients`` imports both. Their
modules fall into layers by where they live, from the bottom (:data:`LAYERS`: what each may
import):

- ``vocabulary``: ``worker/vocabulary/`` (what a campaign's spec means, which every layer
  shares: inputs and their mapping, pools and designs, defaults): nothing of the product beyond
  itself; numpy and scipy, no torch;
- ``math``: the rest of ``worker/`` (the GP, NUTS, acquisitions, a refit, a model's answers and
  pictures): the vocabulary and itself; torch, and no queue, store or web library;
- ``store``: ``service/store/`` and the modules of ``service/`` that it and the jobs stand on
  (:data:`STORE`: the key schema, the queues, the loop's rules, the settings, ...): the
  vocabulary and itself; Redis and RQ, no torch and no web framework (its refusals are the
  domain's, :mod:`service.refusals`; the API maps them to HTTP);
- ``jobs``: ``service/jobs/`` (the RQ jobs, their fan-out, a refit's lease, the worker process):
  the store, the math and the vocabulary, the one layer that imports both the store and torch;
  no web framework;
- ``api``: the rest of ``service/`` (the app, its routes, schemas and pages, the stories of
  ``/next`` and of a model call): the store and the vocabulary, never the jobs (it enqueues them
  by name) nor the math, nor anything that loads torch;
- ``sdk``: ``clients/fbgp_al/`` (``fbgp_al`` itself) and the modules of ``clients/`` itself (a
  plain ``pip install fbgp-al``): of the rest, only the vocabulary that needs nothing beyond
  numpy; httpx and numpy;
- ``tooling``: ``clients/ops/`` and ``clients/reproduction/`` (the ``fbgp-al`` command), on top:
  anything; only the tooling imports the tooling.

The rules: no module imports itself again through others (no cycle); each import of a module
goes to a layer its own may import, and each layer keeps to its libraries; and, collapsed to
packages and to layers, the arrows are the allowed ones and form no cycle. No module is let
off a rule.
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
# what each package imports of the others: worker nothing, service worker, clients both
PACKAGE_ARROWS = {"worker": set(), "service": {"worker"}, "clients": {"service", "worker"}}
# the layers from the bottom, each with the layers it may import (itself included): each only
# layers below it (tests/test_layering.py checks the order)
LAYERS = {
    "vocabulary": {"vocabulary"},
    "math": {"vocabulary", "math"},
    "store": {"vocabulary", "store"},
    "jobs": {"vocabulary", "math", "store", "jobs"},
    "api": {"vocabulary", "store", "api"},
    "sdk": {"vocabulary", "sdk"},
    "tooling": {"vocabulary", "math", "store", "jobs", "api", "sdk", "tooling"},
}
# the store's layer, beside service/store/: the modules of service/ that the store and the jobs
# stand on (the key schema; the queues, what a job costs and how long its result lives; the
# rules of the loop, a refit's supervision and the stopping rule; the settings; the domain's
# refusals; team tokens; metrics, JSON logs and Redis's capacity)
STORE = frozenset(
    {
        "keys",
        "queues",
        "costs",
        "job_results",
        "loop",
        "supervision",
        "stopping",
        "settings",
        "refusals",
        "tokens",
        "observability",
        "capacity",
    }
)
TORCH = {"torch", "pyro", "gpytorch", "numba"}
QUEUE_AND_WEB = {
    "rq",
    "redis",
    "fastapi",
    "starlette",
    "httpx",
    "uvicorn",
    "prometheus_client",
    "pydantic",
    "pydantic_settings",
}
WEB = {"fastapi", "starlette", "uvicorn"}
VOCABULARY_LIBRARIES = {"numpy", "scipy"}
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
    top, below = (parts[0], parts[1] if parts[1:] else "") if parts else ("", "")
    if top == "worker":
        return "vocabulary" if below == "vocabulary" else "math"
    if top == "service":
        if below == "jobs":
            return "jobs"
        return "store" if below == "store" or below in STORE else "api"
    if top == "clients" and below in ("ops", "reproduction"):
        return "tooling"
    return "sdk"  # fbgp_al itself (clients/fbgp_al/) and the modules of clients/


def package(module: str) -> str:
    """The top-level package ``module`` lives in (``fbgp_al`` itself: ``clients``)."""
    parts = module.split(".")[1:]
    return parts[0] if parts and parts[0] in PACKAGES else "clients"


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
    """Every module's import against the rules (see the module's docstring), every cycle, and
    every arrow between packages or layers against their order (:func:`arrow_violations`)."""
    out = [f"cycle: {' <-> '.join(group)}" for group in cycles(graph)]
    for module in sorted(graph.edges):
        mine = layer(module)
        for other in sorted(graph.edges[module]):
            why = _arrow_against(graph, mine, other, layer(other))
            if why:
                out.append(f"{module} -> {other}: {why}")
        out += _libraries_against(module, mine, graph.libraries[module])
    return out + arrow_violations(graph)


def _arrow_against(graph: Graph, mine: str, other: str, theirs: str) -> str | None:
    if theirs not in LAYERS[mine]:
        return WHY[mine]
    if mine in ("store", "api") and libraries_reached(graph, other) & TORCH:
        return "it loads torch, which the API process never does"
    if mine == "sdk" and theirs != "sdk" and libraries_reached(graph, other) - SDK_LIBRARIES:
        return "the SDK imports of the vocabulary only what needs nothing beyond numpy"
    return None


WHY = {
    "vocabulary": "the vocabulary imports nothing of the product beyond itself",
    "math": "the math imports of the product only the vocabulary and itself",
    "store": "the store imports of the product only the vocabulary and itself",
    "jobs": "the jobs import the store, the math and the vocabulary, not the API or clients/",
    "api": "the API imports the store and the vocabulary, never the jobs (enqueued by name) nor "
    "the math",
    "sdk": "the SDK imports of the product only the vocabulary",
    "tooling": "",
}


def _libraries_against(module: str, mine: str, libraries: set[str]) -> list[str]:
    out = []
    if mine == "vocabulary" and libraries - VOCABULARY_LIBRARIES:
        wrong = sorted(libraries - VOCABULARY_LIBRARIES)
        out.append(f"{module} imports {wrong}: the vocabulary needs only numpy and scipy")
    if mine == "math" and libraries & QUEUE_AND_WEB:
        wrong = sorted(libraries & QUEUE_AND_WEB)
        out.append(f"{module} imports {wrong}: the math imports no queue, store or web library")
    if mine in ("store", "jobs") and libraries & WEB:
        wrong = sorted(libraries & WEB)
        out.append(f"{module} imports {wrong}: the store and the jobs load no web framework")
    if mine in ("store", "api") and libraries & TORCH:
        out.append(f"{module} imports {sorted(libraries & TORCH)}: the API never loads torch")
    if mine == "sdk" and libraries - SDK_LIBRARIES:
        wrong = sorted(libraries - SDK_LIBRARIES)
        out.append(f"{module} imports {wrong}: the SDK needs only httpx and numpy")
    return out


def arrows(graph: Graph, by) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """The module graph collapsed by ``by`` (:func:`package` or :func:`layer`): each arrow
    between two of its groups, with the imports that make it."""
    out: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module in sorted(graph.edges):
        for other in sorted(graph.edges[module]):
            if by(module) != by(other):
                out.setdefault((by(module), by(other)), []).append((module, other))
    return out


def arrow_violations(graph: Graph) -> list[str]:
    """Every arrow between packages (:data:`PACKAGE_ARROWS`) or layers (:data:`LAYERS`) that
    their order does not allow, and every cycle among them."""
    out = []
    for kind, by, allowed in (("package", package, PACKAGE_ARROWS), ("layer", layer, LAYERS)):
        found = arrows(graph, by)
        for (mine, theirs), made in sorted(found.items()):
            if theirs not in allowed[mine]:
                example = " -> ".join(made[0])
                out.append(
                    f"{kind} {mine} -> {theirs}: against the order ({_count(made)}: {example})"
                )
        collapsed = Graph({group: set() for group in allowed})
        for mine, theirs in found:
            collapsed.edges[mine].add(theirs)
        out += [f"{kind} cycle: {' <-> '.join(group)}" for group in cycles(collapsed)]
    return out


def _count(made: list) -> str:
    return f"{len(made)} import{'s' if len(made) > 1 else ''}"


def render(graph: Graph) -> str:
    """The graph as text: each module, its layer, and what it imports; then the arrows between
    packages and between layers, each with the count of imports that make it."""
    width = max(len(m) for m in graph.edges)
    lines = []
    for module in sorted(graph.edges):
        imports = ", ".join(sorted(graph.edges[module])) or "-"
        lines.append(f"{module:<{width}}  [{layer(module)}] -> {imports}")
    for kind, by, order in (("packages", package, PACKAGES), ("layers", layer, list(LAYERS))):
        lines.append(f"\n{kind}:")
        found = arrows(graph, by)
        for mine, theirs in sorted(found, key=lambda a: (order.index(a[0]), order.index(a[1]))):
            lines.append(f"  {mine} -> {theirs}  ({_count(found[mine, theirs])})")
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
