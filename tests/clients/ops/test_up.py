"""`fbgp-al up` (:mod:`clients.ops.up`): the whole stack as a new user starts it, with the demo
campaign over real HTTP; a port in use is refused; a killed ``up`` takes its parts with it and a
second ``up`` on its data is refused."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fbgp_al.clients.ops.stack import free_port
from fbgp_al.clients.ops.up import parse_cpus

ROOT = Path(__file__).resolve().parents[3]


def test_up_runs_the_demo_campaign_from_a_fresh_directory_and_stops_everything(tmp_path):
    """As a newcomer runs it: the default, relative ``--data-dir`` under a working directory
    whose path has a space (Redis changes into its --dir before it opens its log)."""
    fresh = tmp_path / "a fresh clone"
    fresh.mkdir()
    port = free_port()
    core = max(os.sched_getaffinity(0))  # its one worker pinned to the last core
    env = {k: v for k, v in os.environ.items() if not k.startswith("FBGP_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fbgp_al.clients.ops.cli",
            "up",
            "--cpus",
            str(core),
            "--port",
            str(port),
            "--demo",
            "gramacy1d",
            "--demo-labels",
            "6",
            "--exit-after-demo",
        ],
        cwd=fresh,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert f"API on http://127.0.0.1:{port}" in out
    assert f"1 worker(s) on core(s) {core};" in out
    assert "label   6" in out and "demo: done" in out and "RMSE" in out
    # Redis kept its append-only file and its log in ./fbgp-data, not in fbgp-data/fbgp-data
    data = fresh / "fbgp-data"
    assert (data / "redis.log").is_file() and (data / "api.log").is_file()
    assert any(p.name.startswith("appendonly") for p in data.rglob("*")), list(data.rglob("*"))
    assert not (data / "fbgp-data").exists()
    assert f"on cores [{core}]," in (data / "worker-0.log").read_text()  # as the worker saw it
    # and nothing is left listening
    import socket

    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_up_with_redis_tls_runs_the_demo_over_tls_only(tmp_path):
    """``--redis-tls``: Redis has no plain-text port; the API, the worker and ``up`` itself reach
    it by ``rediss://``, checking its certificate against the CA made into the data directory
    (kept there, its keys readable by their owner alone)."""
    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FBGP_")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "fbgp_al.clients.ops.cli",
            "up",
            "--workers",
            "1",
            "--port",
            str(port),
            "--data-dir",
            str(data),
            "--redis-tls",
            "--demo",
            "gramacy1d",
            "--demo-labels",
            "5",
            "--exit-after-demo",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "(TLS only)" in out and "rediss://:PASSWORD@" in out and "demo: done" in out, out
    assert f"{data / 'tls' / 'ca.crt'}" in out
    for key in ("ca.key", "tls.key"):
        assert (data / "tls" / key).stat().st_mode & 0o777 == 0o600
    assert "Redis unreachable" not in (data / "worker-0.log").read_text()


def test_cpus_are_numbers_ranges_and_lists_of_the_cores_allowed():
    allowed = {0, 1, 2, 3}
    assert parse_cpus("1", allowed) == [1]
    assert parse_cpus("2,0", allowed) == [0, 2]
    assert parse_cpus("2-3", allowed) == [2, 3]
    assert parse_cpus("0, 2-3", allowed) == [0, 2, 3]
    for bad, said in (
        ("a", "cores are numbers"),
        ("1-", "cores are numbers"),
        ("", "cores are numbers"),
        ("3-2", "a range runs upwards"),
        ("3-5", "core(s) 4, 5 not available here (these are: 0,1,2,3)"),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            parse_cpus(bad, allowed)


def test_up_refuses_cores_it_may_not_use(tmp_path):
    beyond = max(os.sched_getaffinity(0)) + 1
    result = subprocess.run(
        [sys.executable, "-m", "fbgp_al.clients.ops.cli", "up", "--cpus", str(beyond)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"--cpus core(s) {beyond} not available here" in result.stderr
    assert not (tmp_path / "fbgp-data").exists()  # refused before anything started


def test_up_refuses_a_port_in_use(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "fbgp_al.clients.ops.cli",
                "up",
                "--workers",
                "1",
                "--port",
                str(port),
                "--data-dir",
                str(tmp_path / "data"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode != 0
    assert f"port {port} is in use" in result.stdout + result.stderr


@pytest.mark.slow  # a fault test: `make test-fast` leaves it out
def test_a_killed_up_takes_its_parts_with_it_and_a_second_up_on_its_data_is_refused(tmp_path):
    """A second ``fbgp-al up`` on the same data folder is refused while the first runs (two
    Redis servers would share one append-only file); ``kill -9`` of the first stops its Redis,
    API and worker too (none is left running on the data)."""
    import re
    import signal
    import socket
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("FBGP_")}
    port = free_port()
    first = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fbgp_al.clients.ops.cli",
            "up",
            "--workers",
            "1",
            "--port",
            str(port),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 240
        while "API on" not in line and time.monotonic() < deadline:
            line = first.stdout.readline()
            assert line or first.poll() is None, "fbgp-al up exited"
        redis_port = int(re.search(r"Redis on 127\.0\.0\.1:(\d+)", line).group(1))
        second = subprocess.run(
            [sys.executable, "-m", "fbgp_al.clients.ops.cli", "up", "--port", str(free_port())],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode != 0 and "another fbgp-al up" in second.stderr, second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()

    def listening(p: int) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", p)) == 0

    deadline = time.monotonic() + 60
    while (listening(port) or listening(redis_port)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not listening(port) and not listening(redis_port)


def test_ctrl_c_stops_the_api_and_the_workers_before_redis(tmp_path):
    """Ctrl-C in a terminal (SIGINT to the foreground process group): Redis, in a group of its
    own, is stopped by ``up`` once the API and the workers have exited, so that no worker's
    last words are "Redis unreachable"."""
    data, port = tmp_path / "data", free_port()
    command = [
        sys.executable,
        "-m",
        "fbgp_al.clients.ops.cli",
        "up",
        "--workers",
        "1",
        "--port",
        str(port),
        "--data-dir",
        str(data),
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        seen = []
        for line in process.stdout:  # until the stack is up, a worker ready
            seen.append(line)
            if "Ctrl-C stops it all" in line:
                break
        assert process.poll() is None, "".join(seen)
        os.killpg(process.pid, signal.SIGINT)  # as the terminal sends it
        out = "".join(seen) + process.communicate(timeout=120)[0]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, out
    redis_log = (data / "redis.log").read_text()
    worker_log = (data / "worker-0.log").read_text()
    assert "Received SIGTERM" in redis_log and "Received SIGINT" not in redis_log, redis_log
    assert "Redis unreachable" not in worker_log and "Traceback" not in worker_log, worker_log
