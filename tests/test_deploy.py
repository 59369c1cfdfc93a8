"""What can be checked of the Docker deployment without a Docker engine: the compose file and
the Dockerfile name the package's real commands, ports and settings, and the image's install
steps work in a clean virtual environment."""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from service.cli import COMMANDS
from service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "Dockerfile").read_text()
SERVICES = COMPOSE["services"]
WORKERS = {name: s for name, s in SERVICES.items() if name.startswith("worker")}


def _fbgp_command(command: list[str]) -> str:
    assert command[0] == "fbgp-al", command
    assert command[1] in COMMANDS, f"{command[1]} is not an fbgp-al command"
    return command[1]


def test_redis_keeps_every_label_on_a_named_volume_and_is_not_published():
    redis = SERVICES["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command and "--appendfsync always" in command
    assert "ports" not in redis
    volume = redis["volumes"][0].split(":")[0]
    assert volume in COMPOSE["volumes"]


def test_api_is_published_on_loopback_by_default_on_the_port_it_listens_on():
    api = SERVICES["api"]
    assert _fbgp_command(api["command"]) == "api"
    port = api["command"][api["command"].index("--port") + 1]
    published = api["ports"][0]
    assert published == f"${{FBGP_BIND:-127.0.0.1}}:{port}:{port}"
    assert f"EXPOSE {port}" in DOCKERFILE


def test_workers_are_pinned_with_health_checks_and_time_to_finish_a_refit():
    assert len(WORKERS) >= 2
    cores = [w["cpuset"] for w in WORKERS.values()]
    assert len(set(cores)) == len(cores)  # one core each
    for worker in WORKERS.values():
        assert _fbgp_command(worker["command"]) == "worker"
        assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
        assert int(worker["stop_grace_period"].rstrip("s")) >= 60
        assert _fbgp_command(worker["healthcheck"]["test"][1:]) == "healthcheck"


def test_every_service_has_a_health_check_and_waits_for_redis():
    for name, service in SERVICES.items():
        assert "healthcheck" in service, name
        if name != "redis":
            assert service["depends_on"]["redis"]["condition"] == "service_healthy", name


def test_every_variable_the_compose_file_sets_is_one_the_code_reads():
    known = {f"FBGP_{field.upper()}" for field in Settings.model_fields}
    for name, service in SERVICES.items():
        for variable in service.get("environment", {}):
            assert variable in known, f"{name} sets {variable}, which no setting reads"


def test_dockerfile_runs_the_package_entry_point_as_a_non_root_user_with_cpu_torch():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "fbgp-al" in scripts
    cmd = re.search(r"^CMD (\[.*\])", DOCKERFILE, re.M).group(1)
    assert _fbgp_command(yaml.safe_load(cmd)) == "api"
    health = re.search(
        r"CMD (\[.*\])\s*$", DOCKERFILE.split("HEALTHCHECK")[1].split("\n\n")[0], re.M
    )
    assert _fbgp_command(yaml.safe_load(health.group(1))) == "healthcheck"
    assert re.search(r"^USER (?!root)\w+", DOCKERFILE, re.M)
    assert "whl/cpu" in DOCKERFILE and "torch==2.13.0" in DOCKERFILE
    # dependencies are installed before the code is copied, so code changes reuse that layer
    assert DOCKERFILE.index("pip install .") < DOCKERFILE.index("COPY service")


def test_the_images_install_steps_work_in_a_clean_virtualenv(tmp_path):
    """The Dockerfile's steps, in order, in a new venv (torch from this machine's CPU wheel
    instead of the CPU index, which this network cannot reach)."""
    if not shutil.which("python3"):
        pytest.skip("no python3")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    env = dict(os.environ, PIP_NO_CACHE_DIR="1")
    subprocess.run([*pip, "torch==2.13.0"], check=True, env=env, timeout=900)
    # the dependency layer: pyproject and README with empty packages
    layer = tmp_path / "layer"
    layer.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, layer / name)
    for package in ("service", "worker", "clients"):
        (layer / package).mkdir()
        (layer / package / "__init__.py").touch()
    subprocess.run([*pip, "."], check=True, cwd=layer, env=env, timeout=900)
    # the code layer
    app = tmp_path / "app"
    shutil.copytree(
        ROOT, app, ignore=shutil.ignore_patterns(".venv", ".git", "*.egg-info", "build")
    )
    subprocess.run([*pip, "--no-deps", "."], check=True, cwd=app, env=env, timeout=900)
    fbgp = str(venv / "bin" / "fbgp-al")
    out = subprocess.run([fbgp, "--help"], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert "worker" in out.stdout and "healthcheck" in out.stdout
    # the installed package, not the checkout, serves the health check (nothing listens here)
    assert subprocess.run([fbgp, "healthcheck", "api", "--url", "http://127.0.0.1:9"],
                          cwd=tmp_path).returncode == 1  # fmt: skip
