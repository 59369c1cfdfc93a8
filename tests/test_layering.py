"""The import directions: the SDK (clients/ proper) imports neither the service nor torch, and
of the workers only their numpy-only input space; the service imports no torch, nothing of
clients/ and of worker/ only its torch-free modules; worker math imports no web or queue code;
the loop's rules are pure. The tooling (clients/reproduction, clients/ops, with the ``fbgp-al``
command) sits on top and may import any of them."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


# -- the service and the workers ----------------------------------------------------------------
# the worker's glue: RQ jobs, their fan-out, a refit's lease, the worker process; every other
# module of worker/ is math
WORKER_GLUE = {"jobs", "fanout", "lease", "runner"}
# what the service may import from worker/: torch-free by their own rule (numpy and scipy only)
WORKER_FOR_THE_SERVICE = {"worker.design", "worker.defaults", "worker.space"}


def _modules(path: pathlib.Path) -> set[str]:
    """Every module ``path`` imports, by its full dotted name (``from a import b``: ``a.b``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_worker_math_imports_no_web_or_queue_code():
    for path in (ROOT / "worker").glob("*.py"):
        if path.stem in WORKER_GLUE:
            continue
        assert not _imports(path) & {"service", "clients", "fastapi", "rq", "redis", "httpx"}, path


def test_worker_imports_nothing_of_the_clients():
    for path in (ROOT / "worker").glob("*.py"):
        assert "clients" not in _imports(path), path


def test_the_modules_the_service_shares_import_no_torch():
    for name in WORKER_FOR_THE_SERVICE:
        path = ROOT / (name.replace(".", "/") + ".py")
        assert not _imports(path) & {"torch", "pyro", "gpytorch", "numba", "worker"}, path


def test_service_modules_do_not_import_torch_or_the_clients():
    for path in (ROOT / "service").rglob("*.py"):
        assert not _imports(path) & {"torch", "pyro", "gpytorch", "numba", "clients"}, path


def test_service_imports_from_worker_only_its_torch_free_modules():
    for path in (ROOT / "service").rglob("*.py"):
        for name in _modules(path):
            if name == "worker" or name.startswith("worker."):
                assert any(name == m or name.startswith(m + ".") for m in WORKER_FOR_THE_SERVICE), (
                    path,
                    name,
                )


def test_the_api_never_imports_torch():
    code = (
        "import sys, service.main, service.app;"
        "loaded = {'torch', 'pyro', 'gpytorch'} & {m.split('.')[0] for m in sys.modules};"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_loop_rules_are_pure():
    """service/loop.py decides; it reads no Redis, serves no HTTP, fits nothing."""
    assert _imports(ROOT / "service" / "loop.py") <= {"__future__", "collections", "dataclasses",
                                                       "enum", "hashlib", "math",
                                                       "typing"}  # fmt: skip


def test_cli_and_simulators_load_without_torch():
    code = (
        "import sys, clients.ops.cli, clients.simulators, clients.reproduction.protocol;"
        "import worker.design, worker.defaults;"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- the SDK: clients/ proper (client, runner, simulators) needs only httpx and numpy ----------
SDK_FORBIDDEN = {"service", "worker", "torch", "pyro", "gpytorch", "redis", "rq", "fastapi"}
# what the SDK may import from worker/: the input space (numpy only, below), so that an exported
# model maps int, log and choice inputs by the service's own code
WORKER_FOR_THE_SDK = {"worker.space"}


def _sdk_modules() -> list[pathlib.Path]:
    """The modules of the ``clients`` package proper (not its subpackages) and of ``fbgp_al``,
    the SDK's public name."""
    return sorted((ROOT / "clients").glob("*.py")) + sorted(
        (ROOT / "clients" / "fbgp_al").glob("*.py")
    )


def test_sdk_modules_import_neither_the_service_nor_the_workers_nor_torch():
    modules = _sdk_modules()
    assert {p.stem for p in modules} >= {"__init__", "client", "runner", "simulators", "metamodel"}
    for path in modules:
        tree = ast.parse(path.read_text())
        inside = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        forbidden = _imports(path) & SDK_FORBIDDEN
        if forbidden == {"worker"}:  # only its numpy-only modules
            assert {m for m in inside if m.startswith("worker")} <= WORKER_FOR_THE_SDK, path
            forbidden = set()
        assert not forbidden, path
        # and nothing of the tooling beside it, which needs the server's dependencies
        assert not {m for m in inside if m.startswith(("clients.reproduction", "clients.ops"))}


def test_the_sdk_loads_without_torch_scipy_redis_or_fastapi():
    code = (
        "import sys, fbgp_al, clients.client, clients.runner, clients.simulators;"
        "import clients.metamodel;"
        "clients.simulators.get_simulator('motorcycle').mean([1.0]);"
        "loaded = {'torch', 'scipy', 'redis', 'rq', 'fastapi', 'service'}"
        " & {m.split('.')[0] for m in sys.modules};"
        "assert not loaded, loaded;"
        "workers = {m for m in sys.modules if m.split('.')[0] == 'worker'};"
        "assert workers <= {'worker', 'worker.space'}, workers"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_the_input_space_needs_only_numpy():
    """worker/space.py maps inputs for the service, the workers and the SDK's numpy-only
    metamodel: the standard library and numpy only."""
    assert _imports(ROOT / "worker" / "space.py") <= {"__future__", "dataclasses", "functools",
                                                       "math", "numpy"}  # fmt: skip
