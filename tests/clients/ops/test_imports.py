"""``fbgp-al imports``: the graph read from the source, and its rules, which must catch a cycle
and each kind of arrow against them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clients.ops import imports
from clients.ops.imports import ROOT, Graph


def test_every_product_module_is_read_with_its_imports_lazy_ones_too():
    graph = imports.read()
    files = [p for package in imports.PACKAGES for p in (ROOT / package).rglob("*.py")]
    assert len(graph.edges) == len(files)
    assert "service.keys" in graph.edges["service.store.labels"]  # from service.keys import ...
    assert "service.store" in graph.edges["service.deps"]  # from service.store import a class
    assert "worker.jobs.process" in graph.edges["clients.ops.cli"]  # inside a function
    assert {"torch"} <= graph.libraries["worker.gp"]
    assert "json" not in graph.libraries["service.store.labels"]  # the standard library


def _graph(edges: dict[str, set[str]], libraries: dict[str, set[str]] | None = None) -> Graph:
    libraries = libraries or {}
    return Graph(edges, {m: libraries.get(m, set()) for m in edges})


def test_a_cycle_is_against_the_rules():
    graph = _graph({"service.a": {"service.b"}, "service.b": {"service.c"},
                    "service.c": {"service.a"}, "service.d": {"service.a"}})  # fmt: skip
    assert imports.cycles(graph) == [["service.a", "service.b", "service.c"]]
    assert imports.violations(graph) == ["cycle: service.a <-> service.b <-> service.c"]


@pytest.mark.parametrize(("edges", "libraries", "wrong"), [
    ({"worker.gp": {"service.store"}, "service.store": set()}, {}, "worker.gp -> service.store"),
    ({"worker.gp": set()}, {"worker.gp": {"rq"}}, "worker.gp imports ['rq']"),
    ({"service.x": {"worker.jobs"}, "worker.jobs": set()}, {}, "service.x -> worker.jobs"),
    ({"service.x": {"worker.views"}, "worker.views": set()}, {}, "service.x -> worker.views"),
    ({"worker.spec.space": {"worker.gp"}, "worker.gp": set()}, {},
     "worker.spec.space -> worker.gp"),
    ({"worker.spec.design": set()}, {"worker.spec.design": {"torch"}},
     "worker.spec.design imports ['torch']"),
    ({"clients.metamodel": {"worker.gp"}, "worker.gp": set()}, {},
     "clients.metamodel -> worker.gp"),
    ({"service.x": set()}, {"service.x": {"torch"}}, "service.x imports ['torch']"),
    ({"clients.client": {"worker.spec.design"}, "worker.spec.design": set()},
     {"worker.spec.design": {"scipy"}}, "clients.client -> worker.spec.design"),
    ({"clients.client": {"clients.ops.cli"}, "clients.ops.cli": set()}, {},
     "clients.client -> clients.ops.cli"),
    ({"worker.jobs.fanout": {"clients.client"}, "clients.client": set()}, {},
     "worker.jobs.fanout -> clients.client"),
])  # fmt: skip
def test_an_arrow_against_a_rule_is_caught(edges, libraries, wrong):
    (found,) = imports.violations(_graph(edges, libraries))
    assert found.startswith(wrong), found


def test_the_rules_allow_what_the_layers_may_do():
    graph = _graph({"worker.jobs": {"service.store", "worker.gp"},
                    "service.store": {"worker.spec.space"}, "worker.gp": {"worker.spec.space"},
                    "worker.spec.space": set(),
                    "clients.metamodel": {"worker.spec.space"},
                    "clients.ops.cli": {"worker.jobs", "clients.client"}, "clients.client": set()},
                   {"worker.gp": {"torch"}, "worker.spec.space": {"numpy"},
                    "worker.jobs": {"rq", "redis"}})  # fmt: skip
    assert imports.violations(graph) == []


def test_the_command_prints_the_graph():
    done = subprocess.run([sys.executable, "-m", "clients.ops.cli", "imports"], cwd=ROOT,
                          capture_output=True, text=True, check=True)  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if x.startswith("service.store.labels "))
    assert "[service]" in line and "service.keys" in line
