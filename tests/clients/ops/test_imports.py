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
            "fbgp_al.service.a": {"fbgp_al.service.b"},
            "fbgp_al.service.b": {"fbgp_al.service.c"},
            "fbgp_al.service.c": {"fbgp_al.service.a"},
            "fbgp_al.service.d": {"fbgp_al.service.a"},
        }
    )
    assert imports.cycles(graph) == [
        ["fbgp_al.service.a", "fbgp_al.service.b", "fbgp_al.service.c"]
    ]
    assert imports.violations(graph) == [
        "cycle: fbgp_al.service.a <-> fbgp_al.service.b <-> fbgp_al.service.c"
    ]


@pytest.mark.parametrize(
    ("edges", "libraries", "wrong", "arrows"),
    [
        (
            {"fbgp_al.worker.gp": {"fbgp_al.service.store"}, "fbgp_al.service.store": set()},
            {},
            "fbgp_al.worker.gp -> fbgp_al.service.store",
            ["package worker -> service", "layer math -> store"],
        ),
        (
            {"fbgp_al.worker.gp": set()},
            {"fbgp_al.worker.gp": {"rq"}},
            "fbgp_al.worker.gp imports ['rq']",
            [],
        ),
        (
            {"fbgp_al.service.x": {"fbgp_al.service.jobs"}, "fbgp_al.service.jobs": set()},
            {},
            "fbgp_al.service.x -> fbgp_al.service.jobs",
            ["layer api -> jobs"],
        ),
        (
            {"fbgp_al.service.x": {"fbgp_al.worker.views"}, "fbgp_al.worker.views": set()},
            {},
            "fbgp_al.service.x -> fbgp_al.worker.views",
            ["layer api -> math"],
        ),
        (
            {
                "fbgp_al.service.store.x": {"fbgp_al.service.offers"},
                "fbgp_al.service.offers": set(),
            },
            {},
            "fbgp_al.service.store.x -> fbgp_al.service.offers",
            ["layer store -> api"],
        ),
        (
            {
                "fbgp_al.service.keys": {"fbgp_al.service.jobs.lease"},
                "fbgp_al.service.jobs.lease": set(),
            },
            {},
            "fbgp_al.service.keys -> fbgp_al.service.jobs.lease",
            ["layer store -> jobs"],
        ),
        (
            {"fbgp_al.service.store.x": set()},
            {"fbgp_al.service.store.x": {"torch"}},
            "fbgp_al.service.store.x imports ['torch']",
            [],
        ),
        (
            {"fbgp_al.service.store.x": set()},
            {"fbgp_al.service.store.x": {"fastapi"}},
            "fbgp_al.service.store.x imports ['fastapi']",
            [],
        ),
        (
            {"fbgp_al.service.jobs.x": set()},
            {"fbgp_al.service.jobs.x": {"starlette"}},
            "fbgp_al.service.jobs.x imports ['starlette']",
            [],
        ),
        (
            {
                "fbgp_al.worker.vocabulary.space": {"fbgp_al.worker.gp"},
                "fbgp_al.worker.gp": set(),
            },
            {},
            "fbgp_al.worker.vocabulary.space -> fbgp_al.worker.gp",
            ["layer vocabulary -> math"],
        ),
        (
            {"fbgp_al.worker.vocabulary.design": set()},
            {"fbgp_al.worker.vocabulary.design": {"torch"}},
            "fbgp_al.worker.vocabulary.design imports ['torch']",
            [],
        ),
        (
            {"fbgp_al.worker.vocabulary.design": set()},
            {"fbgp_al.worker.vocabulary.design": {"pandas", "numpy"}},
            "fbgp_al.worker.vocabulary.design imports ['pandas']",
            [],
        ),
        (
            {"fbgp_al.clients.metamodel": {"fbgp_al.worker.gp"}, "fbgp_al.worker.gp": set()},
            {},
            "fbgp_al.clients.metamodel -> fbgp_al.worker.gp",
            ["layer sdk -> math"],
        ),
        (
            {"fbgp_al.service.x": set()},
            {"fbgp_al.service.x": {"torch"}},
            "fbgp_al.service.x imports ['torch']",
            [],
        ),
        (
            {
                "fbgp_al.clients.client": {"fbgp_al.worker.vocabulary.design"},
                "fbgp_al.worker.vocabulary.design": set(),
            },
            {"fbgp_al.worker.vocabulary.design": {"scipy"}},
            "fbgp_al.clients.client -> fbgp_al.worker.vocabulary.design",
            [],
        ),
        (
            {
                "fbgp_al.clients.client": {"fbgp_al.clients.ops.cli"},
                "fbgp_al.clients.ops.cli": set(),
            },
            {},
            "fbgp_al.clients.client -> fbgp_al.clients.ops.cli",
            ["layer sdk -> tooling"],
        ),
        (
            {
                "fbgp_al.service.jobs.fanout": {"fbgp_al.clients.client"},
                "fbgp_al.clients.client": set(),
            },
            {},
            "fbgp_al.service.jobs.fanout -> fbgp_al.clients.client",
            ["package service -> clients", "layer jobs -> sdk"],
        ),
    ],
)
def test_an_arrow_against_a_rule_is_caught(edges, libraries, wrong, arrows):
    """The module's import, and the arrows between packages and layers it makes."""
    found, *rest = imports.violations(_graph(edges, libraries))
    assert found.startswith(wrong), found
    assert [line.partition(":")[0] for line in rest] == arrows, rest


def test_a_cycle_of_packages_is_caught():
    """worker imports service while service imports worker: the arrow against the order, and
    the cycle it closes."""
    graph = _graph(
        {
            "fbgp_al.worker.gp": {"fbgp_al.service.keys"},
            "fbgp_al.service.keys": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.worker.vocabulary.space": set(),
        }
    )
    assert [line.partition(":")[0] for line in imports.arrow_violations(graph)] == [
        "package worker -> service",
        "package cycle",
        "layer math -> store",
    ]
    assert "package cycle: service <-> worker" in imports.arrow_violations(graph)


def test_the_rules_allow_what_the_layers_may_do():
    graph = _graph(
        {
            "fbgp_al.service.jobs": {"fbgp_al.service.store", "fbgp_al.worker.gp"},
            "fbgp_al.service.store": {"fbgp_al.worker.vocabulary.space", "fbgp_al.service.keys"},
            "fbgp_al.service.keys": set(),
            "fbgp_al.service.routes.labeling": {"fbgp_al.service.store", "fbgp_al.service.loop"},
            "fbgp_al.service.loop": set(),
            "fbgp_al.worker.gp": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.worker.vocabulary.space": set(),
            "fbgp_al.clients.metamodel": {"fbgp_al.worker.vocabulary.space"},
            "fbgp_al.clients.ops.cli": {"fbgp_al.service.jobs", "fbgp_al.clients.client"},
            "fbgp_al.clients.client": set(),
        },
        {
            "fbgp_al.worker.gp": {"torch"},
            "fbgp_al.worker.vocabulary.space": {"numpy"},
            "fbgp_al.service.store": {"redis"},
            "fbgp_al.service.jobs": {"rq", "redis"},
        },
    )
    assert imports.violations(graph) == []


def test_each_module_has_its_layer_and_package():
    layers = {
        "fbgp_al.worker.vocabulary.space": "vocabulary",
        "fbgp_al.worker.gp": "math",
        "fbgp_al.worker.fitting.ranking": "math",
        "fbgp_al.service.store.labels": "store",
        "fbgp_al.service.keys": "store",
        "fbgp_al.service.queues": "store",
        "fbgp_al.service.jobs": "jobs",
        "fbgp_al.service.jobs.process": "jobs",
        "fbgp_al.service.offers": "api",
        "fbgp_al.service.routes.labeling": "api",
        "fbgp_al": "sdk",
        "fbgp_al.clients.client": "sdk",
        "fbgp_al.clients.ops.cli": "tooling",
        "fbgp_al.clients.reproduction.bench": "tooling",
    }
    assert {m: imports.layer(m) for m in layers} == layers
    assert [imports.package(m) for m in ("fbgp_al", "fbgp_al.service.jobs", "fbgp_al.worker")] == [
        "clients",
        "service",
        "worker",
    ]


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
    assert "[store]" in line and "fbgp_al.service.keys" in line
    packages = done.stdout.split("\npackages:\n")[1].split("\n\n")[0].splitlines()
    assert [p.split("  (")[0].strip() for p in packages] == [
        "service -> worker",
        "clients -> service",
        "clients -> worker",
    ]
