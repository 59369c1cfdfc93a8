"""Stacks of real processes (redis-server with its append-only file, RQ workers, the API) that a
test owns and may kill: each on free loopback ports, stopped afterwards; and a network namespace
of a test's own, linked to this host by a veth pair (``link``), for a worker on "another host"
(root and ``ip netns``; skipped otherwise)."""

import contextlib
import ipaddress
import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pytest

from fbgp_al.clients.ops.stack import LocalStack, fbgp_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def make_stack(tmp_path):
    """``make_stack(workers=2, light=True, **env)`` starts a stack; ``env`` adds ``FBGP_*``
    settings; ``light=False``: every worker serves every queue."""
    stacks = []

    def make(workers: int = 1, light: bool = True, **settings) -> LocalStack:
        env = fbgp_env(**settings)
        stack = LocalStack(tmp_path / f"stack-{len(stacks)}", workers=workers, env=env, light=light)
        stacks.append(stack)
        return stack.start()

    yield make
    for stack in stacks:
        stack.stop()


def wait_for(predicate, seconds: float = 120.0, every: float = 0.1):
    """The first true value of ``predicate()`` (errors count as false) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (httpx.HTTPError, KeyError, ValueError):
            value = None
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not within {seconds:.0f} s")


def slow_campaign(api: httpx.Client, n: int = 40, **changes) -> tuple[str, list, list]:
    """A 2-D campaign whose refits take seconds (one long chain), with ``n`` labels imported:
    its first refit starts at once. Returns the id and the imported data."""
    body = {
        "name": "slow",
        "inputs": [{"name": "a", "lower": 0, "upper": 1}, {"name": "b", "lower": 0, "upper": 1}],
        "pool": {"type": "grid", "points_per_dim": 30},
        "initial_design": {"type": "maximin-lhs", "size": 3},
        "max_labels": 200,
        "mcmc": {"chains": 1, "warmup": 2000, "samples": 2000, "thinning": 20},
        "seed": 3,
    }
    body.update(changes)
    r = api.post("/campaigns", json=body)
    assert r.status_code == 201, r.text
    campaign = r.json()["id"]
    rng = np.random.default_rng(7)
    x = rng.random((n, 2)).tolist()
    y = [float(np.sin(6 * a) + b**2 + 0.05 * rng.standard_normal()) for a, b in x]
    r = api.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
    assert r.status_code == 201, r.text
    return campaign, x, y


def labeled_design(api, name: str) -> str:
    """A small 1-D campaign made through ``api`` (a test client of the app) and its three
    design points labeled: its id. Its next point needs the model."""
    body = {
        "name": name,
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
    return campaign


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

    def start_worker(self, redis_url: str, name: str, log: Path, **settings) -> subprocess.Popen:
        """``fbgp-al worker`` in the namespace; the URL (and ``settings``, as ``FBGP_*``
        variables) go in its environment, not its command line."""
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
                env=fbgp_env(redis_url=redis_url, **settings),
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
