"""The installed package: one import name, ``fbgp_al``, built from the repository's folders by
pyproject.toml's ``package-dir`` (``fbgp_al`` is clients/fbgp_al, ``fbgp_al.service``
service/, ``fbgp_al.worker`` worker/, ``fbgp_al.clients`` clients/)."""

import importlib
import pathlib
import subprocess
import sys
import tomllib

import httpx
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folders() -> set[str]:
    """Every package folder of the product, by the name it is imported as."""
    names = set()
    for package in ("service", "worker", "clients"):
        for init in (ROOT / package).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            if parts[:2] != ("clients", "fbgp_al"):
                names.add(".".join(("fbgp_al", *parts)))
    return names | {"fbgp_al"}


def test_the_listed_packages_are_the_folders():
    """A new subpackage is listed in pyproject.toml, or a plain install would leave it out."""
    assert set(SETUPTOOLS["packages"]) == _folders()
    assert SETUPTOOLS["package-dir"]["fbgp_al"] == "clients/fbgp_al"


def test_the_command_names_a_function_of_the_package():
    """``fbgp-al`` (pyproject.toml's script) is a function of ``fbgp_al``, found where it says."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["fbgp-al"].split(":")
    assert module.startswith("fbgp_al.")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.slow
def test_a_plain_install_puts_one_name_in_site_packages(tmp_path):
    """``pip install .`` in a clean venv: ``fbgp_al`` and its dist-info, nothing else of ours;
    the SDK imports there without torch, FastAPI or Redis (httpx and numpy come from this
    environment's site-packages, put on the path after the venv's own)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = pathlib.Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    before = set(p.name for p in purelib.iterdir())
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(purelib)]
        + [str(ROOT)],
        check=True,
        cwd=tmp_path,
    )
    ours = {p.name for p in purelib.iterdir()} - before - {"bin"}  # --target's scripts folder
    assert {name for name in ours if not name.endswith(".dist-info")} == {"fbgp_al"}, ours
    (purelib / "zz-deps.pth").write_text(f"{pathlib.Path(httpx.__file__).parents[1]}\n")
    code = (
        "import sys\n"
        "from fbgp_al import Client, Metamodel, run_simulator\n"
        "assert 'fbgp_al' in Client.__module__ and Metamodel and run_simulator\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "assert not loaded & {'torch', 'fastapi', 'redis', 'rq'}, loaded\n"
    )
    subprocess.run([python, "-I", "-c", code], check=True, cwd=tmp_path)
    files = {
        p.relative_to(purelib / "fbgp_al").as_posix() for p in (purelib / "fbgp_al").rglob("*")
    }
    assert "service/store/label.lua" in files and "clients/data/motorcycle.json" in files
