"""``fbgp-al imports``: the graph read from the source, and its rules, which must catch a cycle
and each kind of arrow against them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fbgp_al.clients.ops import imports
from fbgp_al.clients.ops.imports import ROOT, Graph


def test_every_product_module_is_read_with_its_imports_lazy_ones_too():
    graph = imports.read()
    files = [p for package in imports.PACKAGES for p in (ROOT / package).rglob("*.py")]
    assert len(graph.edges) == len(files)
    assert (
        "fbgp_al.service.keys" in graph.edges["fbgp_al.service.store.labels"]
    )  # from service.keys import ...
    assert (
        "fbgp_al.service.store" in graph.edges["fbgp_al.service.deps"]
    )  # from service.store import a class
    assert (
        "fbgp_al.service.jobs.process" in graph.edges["fbgp_al.clients.ops.cli"]
    )  # inside a function
    assert {"torch"} <= graph.libraries["fbgp_al.worker.gp"]
    assert "json" not in graph.libraries["fbgp_al.service.store.labels"]  # the standard library


def _graph(edges: dict[str, set[str]], libraries: dict[str, set[str]] | None = None) -> Graph:
    libraries = libraries or {}
    return Graph(edges, {m: libraries.get(m, set()) for m in edges})


def test_a_cycle_is_against_the_rules():
    graph = _graph(
        {
            "service.a": {"service.b"},
            "service.b": {"service.c"},
            "service.c": {"service.a"},
            "service.d": {"service.a"},
        }
    )
    assert imports.cycles(graph) == [["service.a", "service.b", "service.c"]]
    assert imports.violations(graph) == ["cycle: service.a <-> service.b <-> service.c"]


@pytest.mark.parametrize(
    ("edges", "libraries", "wrong"),
    [
        (
            {"fbgp_al.worker.gp": {"fbgp_al.service.store"}, "fbgp_al.service.store": set()},
            {},
            "fbgp_al.worker.gp -> fbgp_al.service.store",
        ),
        (
            {"fbgp_al.worker.gp": set()},
            {"fbgp_al.worker.gp": {"rq"}},
            "fbgp_al.worker.gp imports ['rq']",
        ),
        (
            {"fbgp_al.service.x": {"fbgp_al.service.jobs"}, "fbgp_al.service.jobs": set()},
            {},
            "fbgp_al.service.x -> fbgp_al.service.jobs",
        ),
        (
            {"fbgp_al.service.x": {"fbgp_al.worker.views"}, "fbgp_al.worker.views": set()},
            {},
            "fbgp_al.service.x -> fbgp_al.worker.views",
        ),
        (
            {"fbgp_al.worker.vocabulary.space": {"fbgp_al.worker.gp"}, "fbgp_al.worker.gp": set()},
            {},
            "fbgp_al.worker.vocabulary.space -> fbgp_al.worker.gp",
        ),
        (
            {"fbgp_al.worker.vocabulary.design": set()},
            {"fbgp_al.worker.vocabulary.design": {"torch"}},
            "fbgp_al.worker.vocabulary.design imports ['torch']",
        ),
        (
            {"fbgp_al.clients.metamodel": {"fbgp_al.worker.gp"}, "fbgp_al.worker.gp": set()},
            {},
            "fbgp_al.clients.metamodel -> fbgp_al.worker.gp",
        ),
        (
            {"fbgp_al.service.x": set()},
            {"fbgp_al.service.x": {"torch"}},
            "fbgp_al.service.x imports ['torch']",
        ),
        (
            {
                "fbgp_al.clients.client": {"fbgp_al.worker.vocabulary.design"},
                "fbgp_al.worker.vocabulary.design": set(),
            },
            {"fbgp_al.worker.vocabulary.design": {"scipy"}},
            "fbgp_al.clients.client -> fbgp_al.worker.vocabulary.design",
        ),
        (
            {
                "fbgp_al.clients.client": {"fbgp_al.clients.ops.cli"},
                "fbgp_al.clients.ops.cli": set(),
            },
            {},
            "fbgp_al.clients.client -> fbgp_al.clients.ops.cli",
        ),
        (
            {
                "fbgp_al.service.jobs.fanout": {"fbgp_al.clients.client"},
                "fbgp_al.clients.client": set(),
            },
            {},
            "fbgp_al.service.jobs.fanout -> fbgp_al.clients.client",
        ),
    ],
)
def test_an_arrow_against_a_rule_is_caught(edges, libraries, wrong):
    (found,) = imports.violations(_graph(edges, libraries))
    assert found.startswith(wrong), found


def test_the_rules_allow_what_the_layers_may_do():
    graph = _graph(
        {
            "fbgp_al.service.jobs": {"fbgp_al.service.store", "fbgp_al.worker.gp"},
            "fbgp_al.service.store": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.worker.gp": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.worker.vocabulary.space": set(),
            "fbgp_al.clients.metamodel": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.clients.ops.cli": {"fbgp_al.service.jobs", "fbgp_al.clients.client"},
            "fbgp_al.clients.client": set(),
        },
        {
            "fbgp_al.worker.gp": {"torch"},
            "fbgp_al.worker.vocabulary.space": {"numpy"},
            "fbgp_al.service.jobs": {"rq", "redis"},
        },
    )
    assert imports.violations(graph) == []


def test_the_command_prints_the_graph():
    done = subprocess.run(
        [sys.executable, "-m", "fbgp_al.clients.ops.cli", "imports"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(
        x for x in done.stdout.splitlines() if x.startswith("fbgp_al.service.store.labels ")
    )
    assert "[service]" in line and "fbgp_al.service.keys" in line
