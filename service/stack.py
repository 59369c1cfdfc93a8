"""``fbgp-al up``: Redis with append-only persistence, the API and one pinned worker per core,
started as child processes and stopped together on Ctrl-C."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from redis import Redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(data_dir: Path, port: int, log: Path) -> subprocess.Popen:
    """A redis-server on 127.0.0.1:``port`` keeping an append-only file in ``data_dir``, fsynced
    on every write (a label is acknowledged only once it is on disk)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not on the PATH (Debian: apt-get install redis-server)")
    data_dir.mkdir(parents=True, exist_ok=True)
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir),
               "--appendonly", "yes", "--appendfsync", "always", "--save", "",
               "--logfile", str(log)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    client = Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            return process
        except Exception:
            if process.poll() is not None:
                raise SystemExit(f"redis-server exited; see {log}") from None
            time.sleep(0.05)
    raise SystemExit(f"redis-server did not answer on port {port}; see {log}")


def _fbgp(*args: str) -> list[str]:
    return [sys.executable, "-m", "service.cli", *args]


def wait_http(url: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url} did not answer in {seconds:.0f} s")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> None:
    cores = sorted(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(prog="fbgp-al up", description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=len(cores), help="one per core by default")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--data-dir", type=Path, default=Path("fbgp-data"))
    parser.add_argument("--demo", metavar="SIMULATOR", help="then run a demo campaign (gramacy1d)")
    parser.add_argument("--demo-labels", type=int, default=15)
    parser.add_argument("--exit-after-demo", action="store_true")
    args = parser.parse_args(argv)
    for stop in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (&)
        signal.signal(stop, _interrupt)
    redis_port = free_port()
    env = dict(os.environ, FBGP_REDIS_URL=f"redis://127.0.0.1:{redis_port}/0")
    children: list[subprocess.Popen] = []
    try:
        children.append(start_redis(args.data_dir, redis_port, args.data_dir / "redis.log"))
        for k in range(args.workers):
            core = cores[k % len(cores)]
            children.append(subprocess.Popen(_fbgp("worker", "--cpu", str(core)), env=env))
        children.append(subprocess.Popen(_fbgp("api", "--port", str(args.port)), env=env))
        url = f"http://127.0.0.1:{args.port}"
        wait_http(f"{url}/healthz")
        wait_http(f"{url}/readyz", seconds=120)
        print(f"fbgp-al: API on {url} (docs: {url}/docs), Redis on 127.0.0.1:{redis_port} "
              f"with data in {args.data_dir}, {args.workers} worker(s); Ctrl-C stops it all",
              flush=True)  # fmt: skip
        if args.demo:
            from clients.http_demo import run_demo

            run_demo(url, args.demo, args.demo_labels, token=os.environ.get("FBGP_API_TOKEN"))
            if args.exit_after_demo:
                return
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        print("fbgp-al: a process of the stack exited; stopping the rest", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in reversed(children):
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
