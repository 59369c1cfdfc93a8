"""A worker on another host: ``fbgp-al worker`` in a network namespace of the test's own, linked
to this host by a veth pair with addresses of the test's own, joins a Redis that requires a
password and listens on the link's host end only. A campaign is refitted by that worker; a worker
without the password is refused and never registers. Needs root and ``ip netns`` (skipped
otherwise); touches no address, route or interface but the ones it creates."""

import contextlib
import ipaddress
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from redis import Redis
from rq import Worker
from rq.registry import FinishedJobRegistry

from fbgp_al.clients.ops.stack import fbgp_env, free_port, start_redis
from fbgp_al.service.app import app
from fbgp_al.service.queues import REFIT, fetch_job
from fbgp_al.service.settings import Settings, get_settings

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "remote-worker-test-password-0123"
REFUSED = re.compile(r"NOAUTH|WRONGPASS|authenticat|invalid username-password", re.I)


def _ip(*args: str, netns: str | None = None, check: bool = True):
    command = ["ip", *(["-n", netns] if netns else []), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=check)


def _networks_in_use() -> list[ipaddress.IPv4Network]:
    """Every IPv4 address and route of this host (all tables), as networks."""
    used = []
    for entry in json.loads(_ip("-j", "-4", "addr", "show").stdout or "[]"):
        for address in entry.get("addr_info", []):
            used.append(
                ipaddress.ip_network(f"{address['local']}/{address['prefixlen']}", strict=False)
            )
    for route in json.loads(_ip("-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        if route.get("dst", "default") != "default":
            used.append(ipaddress.ip_network(route["dst"], strict=False))
    return used


def _free_subnet(rng: random.Random) -> ipaddress.IPv4Network:
    """A /30 in 10.0.0.0/8 that overlaps none of this host's addresses and routes."""
    used = _networks_in_use()
    for _ in range(1000):
        subnet = ipaddress.ip_network(
            f"10.{rng.randrange(256)}.{rng.randrange(256)}.{4 * rng.randrange(64)}/30"
        )
        if not any(subnet.overlaps(network) for network in used):
            return subnet
    pytest.skip("no free /30 in 10.0.0.0/8")


@dataclass
class Link:
    """A namespace and the veth pair between it and this host, with processes started in it."""

    netns: str
    host_ip: str
    remote_ip: str
    processes: list = field(default_factory=list)

    def start_worker(self, redis_url: str, name: str, log: Path) -> subprocess.Popen:
        """``fbgp-al worker`` in the namespace; the URL goes in its environment, not its
        command line."""
        with open(log, "w") as out:
            process = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    self.netns,
                    sys.executable,
                    "-m",
                    "fbgp_al.clients.ops.cli",
                    "worker",
                    "--name",
                    name,
                ],
                env=fbgp_env(redis_url=redis_url),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.processes.append(process)
        return process


@pytest.fixture
def link(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("ip netns needs root")
    if shutil.which("ip") is None:
        pytest.skip("no ip command (iproute2)")
    rng = random.Random(os.getpid())  # concurrent runs pick different names and subnets
    subnet = _free_subnet(rng)
    tag = f"{os.getpid() % 100000}{rng.randrange(1000):03d}"  # interface names: 15 bytes at most
    netns, host_end, remote_end = f"fbgpt{tag}", f"fbh{tag}", f"fbr{tag}"
    made = _ip("netns", "add", netns, check=False)
    if made.returncode != 0:
        pytest.skip(f"ip netns add is not permitted here: {made.stderr.strip()}")
    host_ip, remote_ip = (str(a) for a in subnet.hosts())
    link = Link(netns, host_ip, remote_ip)
    try:
        veth = _ip(
            "link",
            "add",
            host_end,
            "type",
            "veth",
            "peer",
            "name",
            remote_end,
            "netns",
            netns,
            check=False,
        )
        if veth.returncode != 0:
            pytest.skip(f"no veth pair here: {veth.stderr.strip()}")
        _ip("addr", "add", f"{host_ip}/30", "dev", host_end)
        _ip("link", "set", host_end, "up")
        _ip("addr", "add", f"{remote_ip}/30", "dev", remote_end, netns=netns)
        _ip("link", "set", remote_end, "up", netns=netns)
        _ip("link", "set", "lo", "up", netns=netns)
        yield link
    finally:
        for process in link.processes:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait(timeout=30)
        _ip("link", "del", host_end, check=False)  # its peer goes with it
        _ip("netns", "del", netns, check=False)


@pytest.fixture
def redis_on_link(link, tmp_path):
    """A redis-server with a password, listening on the link's host end only: its URL."""
    port = free_port()
    data = tmp_path / "redis"
    process = start_redis(data, port, data / "redis.log", password=PASSWORD, bind=(link.host_ip,))
    link.processes.append(process)
    return f"redis://:{PASSWORD}@{link.host_ip}:{port}/0"


def _until(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {seconds:.0f} s")


def test_a_worker_in_another_network_namespace_refits_a_campaign(link, redis_on_link, tmp_path):
    connection = Redis.from_url(redis_on_link)
    log = tmp_path / "remote-worker.log"
    process = link.start_worker(redis_on_link, "remote-worker", log)

    def registered():
        assert process.poll() is None, log.read_text()
        return Worker.all(connection=connection)

    (worker,) = _until(registered, 120, "the remote worker's registration")
    assert worker.name == "remote-worker"
    # it reached Redis from the namespace's end of the link
    assert worker.ip_address.rsplit(":", 1)[0] == link.remote_ip, worker.ip_address

    settings = Settings(redis_url=redis_on_link, job_wait_seconds=60)
    app.dependency_overrides[get_settings] = lambda: settings
    try:
        with TestClient(app) as api:
            body = {
                "name": "remote",
                "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
                "pool": {"type": "grid", "points_per_dim": 51},
                "max_labels": 5,
                "initial_design": {"type": "maximin-lhs", "size": 3},
                "mcmc": {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2},
                "seed": 1,
            }
            r = api.post("/campaigns", json=body)
            assert r.status_code == 201, r.text
            campaign = r.json()["id"]
            for y in (0.1, -0.3, 0.7):
                ticket = api.get(f"/campaigns/{campaign}/next").json()["ticket"]
                r = api.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y})
                assert r.status_code == 201, r.text
            _until(
                lambda: api.get(f"/campaigns/{campaign}").json()["model_version"],
                120,
                f"a model (worker log:\n{log.read_text()})",
            )
            model = api.get(f"/campaigns/{campaign}/model")
            assert model.status_code == 200, model.text
            assert "max_rhat" in model.json()["diagnostics"], model.json()["diagnostics"]
    finally:
        app.dependency_overrides.clear()
    # RQ's records of the refits: all run by the worker in the namespace
    finished = FinishedJobRegistry(REFIT, connection=connection).get_job_ids()
    jobs = [fetch_job(job_id, connection) for job_id in finished]
    assert any(job.func_name == "fbgp_al.service.jobs.refit" for job in jobs), [
        j.func_name for j in jobs
    ]
    assert {job.worker_name for job in jobs} == {"remote-worker"}


def test_a_worker_without_the_password_is_refused(link, redis_on_link, tmp_path):
    connection = Redis.from_url(redis_on_link)
    without = redis_on_link.replace(f":{PASSWORD}@", "")
    wrong = redis_on_link.replace(PASSWORD, "not-" + PASSWORD)
    logs = {name: tmp_path / f"{name}.log" for name in ("no-password", "wrong-password")}
    processes = {
        "no-password": link.start_worker(without, "no-password", logs["no-password"]),
        "wrong-password": link.start_worker(wrong, "wrong-password", logs["wrong-password"]),
    }
    for name, log in logs.items():  # it says why, or gives up
        _until(
            lambda log=log, name=name: (
                REFUSED.search(log.read_text()) or processes[name].poll() is not None
            ),
            120,
            f"{name} refused",
        )
    time.sleep(3.0)  # and tries again, in vain
    assert Worker.all(connection=connection) == []
    for log in logs.values():
        assert REFUSED.search(log.read_text()), log.read_text()
