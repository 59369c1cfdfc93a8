"""What can be checked of the Docker deployment without a Docker engine: the compose file, the
Dockerfile, .dockerignore and .ci/docker name the package's real commands, ports, settings and
each other's variables. .ci/docker builds the images and runs the stack for real."""

import os
import re
import subprocess
import tomllib
from pathlib import Path

import yaml

from fbgp_al.clients.ops.cli import COMMANDS
from fbgp_al.service.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_TEXT = (ROOT / "docker-compose.yml").read_text()
COMPOSE = yaml.safe_load(COMPOSE_TEXT)
DOCKERFILE = (ROOT / "Dockerfile").read_text()
CI = ROOT / ".ci" / "docker"
SERVICES = COMPOSE["services"]
WORKERS = {name: s for name, s in SERVICES.items() if name.startswith("worker")}
FBGP = {name: s for name, s in SERVICES.items() if not name.startswith("redis")}  # fbgp-al's
LONG_RUNNING = {name: s for name, s in SERVICES.items() if name != "redis-secret"}
# the entrypoint of the fbgp-al services (compose reads $$ as $)
WITH_REDIS_URL = (
    'FBGP_REDIS_URL="redis://:$$(cat /run/fbgp/redis-password)@redis:6379/0" exec "$$@"'
)


def _fbgp_command(command: list[str]) -> str:
    assert command[0] == "fbgp-al", command
    assert command[1] in COMMANDS, f"{command[1]} is not an fbgp-al command"
    return command[1]


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", re.sub(r"^\s*#.*\n", "", DOCKERFILE, flags=re.M))
    return [tuple(line.split(None, 1)) for line in text.splitlines() if line.strip()]


def _build_args() -> dict[str, str]:
    """``ARG NAME=default`` of the Dockerfile."""
    return dict(arg.split("=", 1) for op, arg in _instructions() if op == "ARG")


def test_redis_keeps_every_label_on_a_named_volume_and_is_not_published():
    redis = SERVICES["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command and "--appendfsync always" in command
    assert "ports" not in redis
    volume, folder = redis["volumes"][0].split(":")[:2]
    assert volume in COMPOSE["volumes"]
    # the append-only file in the volume's folder, whatever the image's working folder
    assert f"--dir {folder}" in command


def test_redis_is_the_official_image_by_default_and_requires_a_password_kept_on_a_volume():
    redis, secret = SERVICES["redis"], SERVICES["redis-secret"]
    assert redis["image"] == secret["image"] == "${FBGP_REDIS_IMAGE:-redis:7}"
    # its config file (requirepass) comes from the one-shot redis-secret, which makes the password
    # once (or takes REDIS_PASSWORD) and keeps it on a volume of its own
    assert redis["command"][:2] == ["redis-server", "/run/fbgp/redis.conf"]
    assert "--protected-mode yes" in " ".join(redis["command"])
    assert redis["depends_on"]["redis-secret"]["condition"] == "service_completed_successfully"
    assert "redis-secret:/run/fbgp:ro" in redis["volumes"]
    assert "redis-secret:/run/fbgp" in secret["volumes"] and "redis-secret" in COMPOSE["volumes"]
    script = secret["command"][0]
    assert "requirepass" in script and "/dev/urandom" in script and "umask 077" in script
    assert secret["restart"] == "no" and "ports" not in secret
    assert "REDISCLI_AUTH" in " ".join(redis["healthcheck"]["test"])


def test_the_api_and_the_workers_get_the_redis_password_on_no_command_line():
    """FBGP_REDIS_URL is made in the container from the secret volume, not set in the compose
    file (where `docker inspect` shows it) nor given as an argument."""
    for name, service in FBGP.items():
        assert service["entrypoint"] == ["sh", "-c", WITH_REDIS_URL, "with-redis-url"], name
        assert "redis-secret:/run/fbgp:ro" in service["volumes"], name
        assert "FBGP_REDIS_URL" not in service.get("environment", {}), name


def test_api_is_published_on_loopback_by_default_on_the_port_it_listens_on():
    api = SERVICES["api"]
    assert _fbgp_command(api["command"]) == "api"
    port = api["command"][api["command"].index("--port") + 1]
    published = re.fullmatch(
        r"\$\{FBGP_BIND:-127\.0\.0\.1\}:\$\{FBGP_PORT:-(\d+)\}:(\d+)", api["ports"][0]
    )
    assert published, api["ports"]
    assert published.groups() == (port, port)
    assert f"EXPOSE {port}" in DOCKERFILE


def test_workers_are_pinned_with_health_checks_and_time_to_finish_a_refit():
    assert len(WORKERS) >= 2
    cores = [w["cpuset"] for w in WORKERS.values()]
    assert len(set(cores)) == len(cores)  # one core each
    for worker in WORKERS.values():
        assert _fbgp_command(worker["command"]) == "worker"
        assert worker["depends_on"]["redis"]["condition"] == "service_healthy"
        assert int(worker["stop_grace_period"].rstrip("s")) >= 60
        test = worker["healthcheck"]["test"]
        assert test[:5] == ["CMD", "sh", "-c", WITH_REDIS_URL, "with-redis-url"], test
        assert test[5:] == ["fbgp-al", "healthcheck", "worker"]
        assert worker["restart"] == "unless-stopped"


def test_the_api_and_the_workers_run_under_an_init_that_forwards_sigterm():
    """A worker is PID 1 otherwise, and PID 1 ignores SIGTERM until the worker sets its handler:
    a stop during its start-up waited out stop_grace_period, then SIGKILL."""
    for name, service in FBGP.items():
        assert service.get("init") is True, name


def test_every_service_has_a_health_check_and_waits_for_redis():
    for name, service in LONG_RUNNING.items():
        assert "healthcheck" in service, name
        if name != "redis":
            assert service["depends_on"]["redis"]["condition"] == "service_healthy", name


def test_every_containers_log_rotates_by_size():
    """Docker's json-file driver keeps a container's output without bound unless told: each
    service's is rotated (a size and a count of files)."""
    for name, service in SERVICES.items():
        logging = service.get("logging", {})
        assert logging.get("driver") == "json-file", name
        assert logging["options"]["max-size"] and int(logging["options"]["max-file"]) >= 1, name


def test_the_api_sees_redis_data_volume_read_only_for_the_disk_check():
    """/readyz and /metrics report the free disk of Redis's volume (FBGP_DATA_DIR)."""
    api, redis = SERVICES["api"], SERVICES["redis"]
    volume = redis["volumes"][0].split(":")[0]
    folder = api["environment"]["FBGP_DATA_DIR"]
    assert f"{volume}:{folder}:ro" in api["volumes"]


def test_every_variable_the_compose_file_sets_is_one_the_code_reads():
    known = {f"FBGP_{field.upper()}" for field in Settings.model_fields}
    for name, service in LONG_RUNNING.items():
        for variable in service.get("environment", {}):
            assert variable in known, f"{name} sets {variable}, which no setting reads"


def test_the_api_and_the_workers_run_one_image_built_with_the_dockerfiles_arguments():
    """FBGP_IMAGE names it; each of the Dockerfile's build arguments can be set from the
    environment as FBGP_<ARG>, with the Dockerfile's own default."""
    args = _build_args()
    assert args["BASE_IMAGE"] == "python:3.11-slim"
    assert args["TORCH_INDEX_URL"] == "https://download.pytorch.org/whl/cpu"
    for name, service in FBGP.items():
        assert service["image"] == "${FBGP_IMAGE:-fbgp-al}", name
        assert service["build"]["context"] == ".", name
        assert service["build"]["args"] == {
            arg: f"${{FBGP_{arg}:-{default}}}" for arg, default in args.items()
        }, name


def test_the_base_image_is_a_build_argument():
    instructions = _instructions()
    ops = [op for op, _ in instructions]
    first_from = ops.index("FROM")
    assert ("ARG", "BASE_IMAGE=python:3.11-slim") in instructions[:first_from]
    assert instructions[first_from] == ("FROM", "${BASE_IMAGE}")
    assert ops.count("FROM") == 1


def test_dockerfile_runs_the_package_entry_point_as_a_non_root_user_with_cpu_torch():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "fbgp-al" in scripts
    cmd = re.search(r"^CMD (\[.*\])", DOCKERFILE, re.M).group(1)
    assert _fbgp_command(yaml.safe_load(cmd)) == "api"
    assert re.search(r"^USER (?!root)\w+", DOCKERFILE, re.M)
    assert "whl/cpu" in DOCKERFILE and "torch==2.13.0" in DOCKERFILE
    assert '--index-url "${TORCH_INDEX_URL}"' in DOCKERFILE
    # dependencies (the package's and the server's extra, read from pyproject.toml; the package
    # alone is the SDK, httpx and numpy) are installed before the code is copied, so code
    # changes reuse that layer; the package itself, its dependencies there, after it
    deps = DOCKERFILE.index("['optional-dependencies']['server']")
    assert (
        deps
        < DOCKERFILE.index("pip install -r /tmp/requirements.txt")
        < DOCKERFILE.index("COPY service")
    )
    assert DOCKERFILE.index("COPY clients") < DOCKERFILE.index("pip install --no-deps '.[server]'")
    assert not re.search(r"pip install (--no-deps )?\.\s", DOCKERFILE)


def test_the_images_health_check_fits_either_role():
    """One image runs the API or a worker (`docker run ... fbgp-al fbgp-al worker`): its
    HEALTHCHECK names no role, so that it passes for whichever runs (role ``auto``)."""
    health = [arg for op, arg in _instructions() if op == "HEALTHCHECK"]
    assert len(health) == 1
    command = yaml.safe_load(re.search(r"CMD (\[.*\])\s*$", health[0]).group(1))
    assert _fbgp_command(command) == "healthcheck"
    assert command[2:] in ([], ["auto"]), command
    assert "start-period" in health[0]


def test_the_workers_numba_kernels_are_compiled_into_the_image_for_the_runtime_user():
    """A worker compiles its kernels before it serves (5 s to a minute on one core): the image runs
    the same call at build time, as the runtime user, into a cache dir of its own."""
    instructions = _instructions()
    env = " ".join(arg for op, arg in instructions if op == "ENV")
    cache = re.search(r"NUMBA_CACHE_DIR=(\S+)", env).group(1)
    assert not cache.startswith("/tmp")  # not a dir a container may start without
    user = next(arg for op, arg in instructions if op == "USER")
    assert re.search(rf'chown {user} "\$\{{NUMBA_CACHE_DIR\}}"', DOCKERFILE)
    runner = (ROOT / "service" / "jobs" / "process.py").read_text()
    call = re.search(r"^\s*(sample_posterior\(.*\))\s*# compile", runner, re.M).group(1)
    runs = [i for i, (op, arg) in enumerate(instructions) if op == "RUN" and call in arg]
    assert len(runs) == 1, f"the Dockerfile does not run {call}"
    compile_at = runs[0]
    assert instructions.index(("USER", user)) < compile_at  # as the runtime user
    last_install = max(i for i, (op, arg) in enumerate(instructions) if "pip install" in arg)
    assert last_install < compile_at  # numba's cache is keyed on the installed file's time stamp
    # from outside WORKDIR: the installed package is compiled, not /app's copy (another path)
    assert instructions[compile_at][1].startswith("cd / &&")


def test_dockerignore_lets_in_only_what_the_dockerfile_copies():
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"  # .venv, .git, fbgp-data, results, caches, docs, tests stay out
    let_in = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = set()
    for op, arg in _instructions():
        if op == "COPY":
            copied.update(arg.split()[:-1])
    assert let_in == copied
    for path in copied:
        assert (ROOT / path).exists(), path
    assert "**/__pycache__" in patterns


def test_ci_docker_is_an_executable_script_and_sets_only_variables_the_compose_file_reads():
    assert os.access(CI, os.X_OK)
    subprocess.run(["bash", "-n", str(CI)], check=True)
    script = CI.read_text()
    read = set(re.findall(r"\$\{(FBGP_\w+)", COMPOSE_TEXT))
    exported = set()
    for line in re.findall(r"^\s*export (.*)$", script, re.M):
        exported.update(re.findall(r"(FBGP_\w+)=", line))
    assert {"FBGP_IMAGE", "FBGP_REDIS_IMAGE", "FBGP_PORT"} <= exported
    assert exported <= read, exported - read
    # the build arguments it passes are the Dockerfile's
    passed = set(re.findall(r'--build-arg "(\w+)=', script))
    assert passed == set(_build_args())
