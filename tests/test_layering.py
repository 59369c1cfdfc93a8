"""The import directions: the graph of every product module keeps the rules of
:mod:`clients.ops.imports` (no cycle; the math imports no web or queue code; the service loads no
torch; the glue of service/jobs/ is the one layer that imports both; the SDK needs only httpx and
numpy; the tooling sits on top), and the processes load what those rules promise: the API no
torch, the SDK nothing beyond httpx and numpy. The loop's rules are pure."""

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
    allowed = {"__future__", "dataclasses", "functools", "math", "numpy"}
    assert _imports(ROOT / "worker" / "vocabulary" / "space.py") <= allowed
    assert _imports(ROOT / "worker" / "vocabulary" / "lognormal.py") <= allowed | {"fbgp_al.worker"}
    assert _imports(ROOT / "worker" / "vocabulary" / "sobol.py") <= allowed | {
        "fbgp_al.worker",
        "collections",
    }
