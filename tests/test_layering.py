"""The import directions: the graph of every product module keeps the rules of
:mod:`clients.ops.imports` (no cycle; the packages import one way, worker nothing of the
product, service worker, clients both; the layers in their order, from the vocabulary, the math
and the store up to the jobs, the API, the SDK and the tooling), and the processes load what
those rules promise: the API no torch, the SDK nothing beyond httpx and numpy. The loop's rules
are pure."""

import ast
import pathlib
import subprocess
import sys

from fbgp_al.clients.ops import imports

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _top(name: str) -> str:
    """A library's top-level name, or the product's package (``fbgp_al.service``)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "fbgp_al" else parts[0]


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {_top(alias.name) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(_top(node.module))
    return names


# -- the import graph (clients/ops/imports.py holds its rules) ----------------------------------
def test_the_import_graph_keeps_its_rules():
    """No cycle, and no arrow against the layers' rules, among every product module."""
    assert imports.violations(imports.read()) == []


def test_the_packages_import_one_way():
    """Collapsed to its three packages, the graph is worker <- service <- clients (and
    clients -> worker): worker/ imports nothing of the product beyond itself."""
    found = set(imports.arrows(imports.read(), imports.package))
    assert found == {("service", "worker"), ("clients", "service"), ("clients", "worker")}
    assert {
        "worker": set(),
        "service": {"worker"},
        "clients": {"service", "worker"},
    } == imports.PACKAGE_ARROWS


def test_the_layers_import_only_those_below_them():
    """Each layer imports only layers before it in :data:`clients.ops.imports.LAYERS` (from the
    bottom: vocabulary, math, store, jobs, api, sdk, tooling), so that neither the layers nor the
    packages can form a cycle; the graph's own arrows between layers keep to them."""
    order = list(imports.LAYERS)
    assert order == ["vocabulary", "math", "store", "jobs", "api", "sdk", "tooling"]
    for at, name in enumerate(order):
        assert imports.LAYERS[name] <= set(order[: at + 1]), name
    assert imports.LAYERS["api"].isdisjoint({"jobs", "math"})
    assert imports.LAYERS["sdk"] == {"vocabulary", "sdk"}
    found = imports.arrows(imports.read(), imports.layer)
    assert all(theirs in imports.LAYERS[mine] for mine, theirs in found), sorted(found)
    assert ("jobs", "store") in found and ("jobs", "math") in found and ("api", "store") in found


def test_an_import_of_the_service_from_the_worker_is_caught():
    """The rules fail the real graph with one more import: a worker module that imports the
    service (its module arrow, and its package and layer arrows), or a module of the API that
    imports the jobs."""
    graph = imports.read()
    graph.edges["fbgp_al.worker.gp"].add("fbgp_al.service.keys")
    wrong = imports.violations(graph)
    assert any(w.startswith("fbgp_al.worker.gp -> fbgp_al.service.keys:") for w in wrong)
    assert any(w.startswith("package worker -> service:") for w in wrong)
    assert any(w.startswith("package cycle: service <-> worker") for w in wrong)
    assert any(w.startswith("layer math -> store:") for w in wrong)
    graph = imports.read()
    graph.edges["fbgp_al.service.offers"].add("fbgp_al.service.jobs")
    wrong = {w.partition(": ")[0]: w.partition(": ")[2] for w in imports.violations(graph)}
    assert wrong.pop("fbgp_al.service.offers -> fbgp_al.service.jobs").startswith("the API")
    assert wrong.pop("layer api -> jobs").startswith("against the order")
    # and what imports the offers now loads torch: the app, its routes
    assert "fbgp_al.service.routes.labeling -> fbgp_al.service.offers" in wrong
    assert set(wrong.values()) == {"it loads torch, which the API process never does"}


def test_worker_imports_nothing_of_the_service_nor_a_queue():
    """Read file by file (not through clients/ops/imports.py): no module of worker/ imports
    fbgp_al.service or fbgp_al.clients, redis or rq, nor does worker/vocabulary/ import the math
    or torch."""
    for path in (ROOT / "worker").rglob("*.py"):
        names = _imports(path)
        assert not names & {"fbgp_al.service", "fbgp_al.clients", "fbgp_al", "redis", "rq"}, path
        if "vocabulary" in path.relative_to(ROOT).parts:
            assert names <= {"fbgp_al.worker", "numpy", "scipy"} | set(sys.stdlib_module_names)
            assert (
                not {m for m in _modules(path) if m.startswith("fbgp_al.worker.")} - _vocabulary()
            ), path


def _modules(path: pathlib.Path) -> set[str]:
    """The product modules a file imports by name (``from fbgp_al.worker.x import y``: x)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
    return out


def _vocabulary() -> set[str]:
    return {"fbgp_al.worker.vocabulary"} | {
        f"fbgp_al.worker.vocabulary.{p.stem}" for p in (ROOT / "worker" / "vocabulary").glob("*.py")
    }


def test_the_api_never_imports_torch():
    code = (
        "import sys, fbgp_al.service.main, fbgp_al.service.app;"
        "loaded = {'torch', 'pyro', 'gpytorch'} & {m.split('.')[0] for m in sys.modules};"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_loop_rules_are_pure():
    """service/loop.py and service/supervision.py decide; they read no Redis, serve no HTTP,
    fit nothing (the supervision rule reads the loop's state types, nothing else)."""
    pure = {"__future__", "collections", "dataclasses", "enum", "hashlib", "math", "typing"}
    assert _imports(ROOT / "service" / "loop.py") <= pure
    assert _imports(ROOT / "service" / "supervision.py") <= pure | {"fbgp_al.service"}


def test_no_module_is_over_450_lines_nor_a_store_module_over_300():
    """A module holds one thing: none of the product's is over 450 lines, none of the store's
    nouns over 300."""
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
        for package in ("service", "worker", "clients")
        for p in (ROOT / package).rglob("*.py")
    }
    assert {p: n for p, n in sizes.items() if n > 450} == {}
    assert {p: n for p, n in sizes.items() if p.startswith("service/store/") and n > 300} == {}


def test_the_formatter_owns_the_layout():
    """``ruff format`` lays out every line (``make test`` checks it does): the sizes above are
    of formatted code. It is switched off only for a data table, and at most 20 times."""
    skipped = {
        f"{p.relative_to(ROOT)}:{i}": line.strip()
        for package in ("service", "worker", "clients", "tests", "docs")
        for p in (ROOT / package).rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "fmt: skip" in line or "fmt: off" in line
    }
    assert len(skipped) <= 20, skipped


def test_cli_and_simulators_load_without_torch():
    code = (
        "import sys, fbgp_al.clients.ops.cli, fbgp_al.clients.simulators;"
        "import fbgp_al.clients.reproduction.protocol;"
        "import fbgp_al.worker.vocabulary.design, fbgp_al.worker.vocabulary.defaults;"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- the SDK: clients/ proper (client, runner, simulators) needs only httpx and numpy ----------
def test_the_sdk_loads_without_torch_scipy_redis_or_fastapi():
    code = (
        "import sys, fbgp_al, fbgp_al.clients.client, fbgp_al.clients.runner;"
        "import fbgp_al.clients.simulators;"
        "import fbgp_al.clients.metamodel;"
        "fbgp_al.clients.simulators.get_simulator('motorcycle').mean([1.0]);"
        "loaded = {'torch', 'scipy', 'redis', 'rq', 'fastapi', 'fbgp_al.service'}"
        " & {n for m in sys.modules for n in (m.split('.')[0], '.'.join(m.split('.')[:2]))};"
        "assert not loaded, loaded;"
        "workers = {m for m in sys.modules if m.startswith('fbgp_al.worker')};"
        "assert workers <= {'fbgp_al.worker', 'fbgp_al.worker.vocabulary',"
        " 'fbgp_al.worker.vocabulary.space', 'fbgp_al.worker.vocabulary.lognormal',"
        " 'fbgp_al.worker.vocabulary.sobol'}, workers"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_input_space_needs_only_numpy():
    """worker/vocabulary/space.py maps inputs for the service, the workers and the SDK's numpy-only
    metamodel: the standard library and numpy only; so does worker/vocabulary/lognormal.py, a log
    output's predictions for both (with the numpy erf of worker/vocabulary/sobol.py)."""
    allowed = {"__future__", "collections", "dataclasses", "functools", "math", "numpy"}
    assert _imports(ROOT / "worker" / "vocabulary" / "space.py") <= allowed
    assert _imports(ROOT / "worker" / "vocabulary" / "lognormal.py") <= allowed | {"fbgp_al.worker"}
    assert _imports(ROOT / "worker" / "vocabulary" / "sobol.py") <= allowed | {"fbgp_al.worker"}
