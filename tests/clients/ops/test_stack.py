"""The local stack of ``fbgp-al up`` (:mod:`clients.ops.stack`). Its Redis requires a password:
made once per data dir, kept there with mode 0600, given to Redis and to the API and workers
without a command line showing it, and the same after a restart, so that the data kept stays
reachable. Waiting for a server or for the workers stops as soon as they exit."""

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis
from redis.exceptions import AuthenticationError, ResponseError

from fbgp_al.clients.ops.stack import free_port
from tests.reliability.conftest import labeled_design

ROOT = Path(__file__).resolve().parents[3]


def _up(data: Path, out: Path, *args: str) -> tuple[subprocess.Popen, int, int]:
    """``fbgp-al up`` with one worker until /readyz says yes: the process, API and Redis ports."""
    port, redis_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FBGP_")}
    with open(out, "w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "fbgp_al.clients.ops.cli",
                "up",
                "--workers",
                "1",
                "--port",
                str(port),
                "--redis-port",
                str(redis_port),
                "--data-dir",
                str(data),
                *args,
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 180
    while "requires the password" not in out.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            pytest.fail(f"fbgp-al up did not start:\n{out.read_text()}")
        time.sleep(0.2)
    return process, port, redis_port


def _stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGINT)  # Ctrl-C: it stops its children
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _ping(port: int) -> bytes:
    """Redis's answer to a PING from a client that gave no password."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(200)


def _command_lines() -> list[bytes]:
    lines = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):  # gone meanwhile
                lines.append((proc / "cmdline").read_bytes())
    return lines


@pytest.mark.slow  # a stack of its own stopped and started again: `make test-fast` leaves it out
def test_up_redis_refuses_a_client_without_the_password_while_the_stack_works(tmp_path):
    data = tmp_path / "data"
    process, port, redis_port = _up(data, tmp_path / "up-1.out")
    try:
        secret = data / "redis-password"
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        password = secret.read_text().strip()
        assert len(password) >= 32

        assert _ping(redis_port).startswith(b"-NOAUTH")
        with pytest.raises(AuthenticationError):
            Redis(port=redis_port).ping()
        with pytest.raises((AuthenticationError, ResponseError)):
            Redis(port=redis_port, password="not-the-password").ping()
        redis = Redis(port=redis_port, password=password, decode_responses=True)
        assert redis.ping()
        assert redis.config_get("protected-mode") == {"protected-mode": "yes"}
        assert redis.config_get("bind") == {"bind": "127.0.0.1"}
        # in no process's command line (`ps`), nor in up's output
        assert not [line for line in _command_lines() if password.encode() in line]
        assert password not in (tmp_path / "up-1.out").read_text()
        assert "PASSWORD@127.0.0.1" in (tmp_path / "up-1.out").read_text()

        # the API and the worker reach it: a campaign gets its first model
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as api:
            campaign = labeled_design(api, "up")
            deadline = time.monotonic() + 120
            while not api.get(f"/campaigns/{campaign}").json()["model_version"]:
                assert time.monotonic() < deadline, "no model from the worker"
                time.sleep(0.2)
    finally:
        _stop(process)
    assert process.returncode == 0, (tmp_path / "up-1.out").read_text()

    # started again on the same data dir: the same password, the campaign still there, and the
    # whole URL printed when asked for
    process, port, redis_port = _up(data, tmp_path / "up-2.out", "--print-redis-url")
    try:
        assert secret.read_text().strip() == password
        assert (
            f"redis://:{password}@127.0.0.1:{redis_port}/0" in (tmp_path / "up-2.out").read_text()
        )
        r = httpx.get(f"http://127.0.0.1:{port}/campaigns/{campaign}", timeout=30)
        assert r.status_code == 200 and r.json()["n_labeled"] == 3, r.text
        assert _ping(redis_port).startswith(b"-NOAUTH")
    finally:
        _stop(process)


def test_waiting_for_a_server_stops_as_soon_as_it_exits(tmp_path):
    """A server that dies while starting is reported at once, with its log, not after the
    minutes that a slow first start on a cold disk is given."""
    from fbgp_al.clients.ops.stack import wait_http

    log = tmp_path / "api.log"
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(SystemExit, match=r"exited with code 3; see .*api\.log") as stopped:
        wait_http(f"http://127.0.0.1:{free_port()}/healthz", seconds=120, process=process, log=log)
    assert "did not answer" not in str(stopped.value)


def test_waiting_for_workers_stops_as_soon_as_every_worker_exits(tmp_path):
    """Workers that all die while the stack waits for them are reported at once, not after the
    minutes that a first start (compiling the sampler's kernels) is given."""
    from fbgp_al.clients.ops.stack import LocalStack

    stack = LocalStack(tmp_path, workers=2)
    stack.api = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stack.workers = [
        subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"]) for _ in range(2)
    ]
    try:
        with pytest.raises(SystemExit, match="every worker exited"):
            stack.wait_ready(seconds=120)
    finally:
        stack.api.kill()
        stack.api.wait()


SPIN = "import time\nend = time.process_time() + {}\nwhile time.process_time() < end: pass\n"
BURN = f"""
import subprocess, sys, time
if len(sys.argv) > 1:  # a child that burns CPU of its own and is waited for
    subprocess.run([sys.executable, "-c", {SPIN.format(0.4)!r}])
{SPIN.format(0.3)}
print(time.process_time(), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("child", [False, True])
def test_a_parts_cpu_seconds_are_what_the_process_itself_counts(tmp_path, child):
    """The CPU seconds read from /proc for a part are those the part's own clock gives,
    with those of the children it waited for: the stack's parts' CPU, by part."""
    from fbgp_al.clients.ops.stack import LocalStack, process_seconds

    stack = LocalStack(tmp_path, workers=1)
    command = [sys.executable, "-c", BURN, *(["child"] if child else [])]
    stack.workers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True)]
    try:
        own = float(stack.workers[0].stdout.readline())
        waited = 0.4 if child else 0.0
        seconds = stack.cpu_seconds()
        assert seconds["workers"] == pytest.approx(own + waited, abs=0.1)
        assert seconds["api"] == seconds["redis"] == 0.0  # not started
    finally:
        stack.workers[0].kill()
        stack.workers[0].wait()
    assert process_seconds(stack.workers[0].pid) == 0.0  # gone
