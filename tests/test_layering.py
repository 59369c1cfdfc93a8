"""The import directions of DESIGN.md: worker math imports no web or queue code, the service
never imports torch, and the built-in simulators need neither."""

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


def test_worker_math_imports_no_web_or_queue_code():
    for path in (ROOT / "worker").glob("*.py"):
        if path.stem == "jobs":  # the one glue module
            continue
        assert not _imports(path) & {"service", "clients", "fastapi", "rq", "redis", "httpx"}, path


def test_service_modules_do_not_import_torch():
    for path in (ROOT / "service").glob("*.py"):
        assert not _imports(path) & {"torch", "pyro", "gpytorch"}, path


def test_cli_and_simulators_load_without_torch():
    code = (
        "import sys, service.cli, clients.simulators, clients.protocol, worker.design;"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
