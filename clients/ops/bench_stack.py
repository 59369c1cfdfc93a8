"""The stack and the campaigns of ``fbgp-al bench-service``'s measures: a stack of this machine's
own, campaign bodies of a built-in simulator, random observations imported."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import httpx

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops.stack import LocalStack


@contextlib.contextmanager
def stack_client(workers: int, timeout: float, light: bool = True):
    """A stack of this machine's own and a client of its API, started and stopped around the
    block (``light``: worker 0 light, as ``fbgp-al up`` starts it)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalStack(Path(tmp), workers=workers, light=light).start() as stack,
        httpx.Client(base_url=stack.url, timeout=timeout) as client,
    ):
        yield stack, client


@contextlib.contextmanager
def service(workers: int, timeout: float, light: bool = True):
    """A client of a stack of this machine's own (:func:`stack_client`)."""
    with stack_client(workers, timeout, light) as (_, client):
        yield client


def campaign_body(sim, mode: str, max_labels: int, mcmc: dict) -> dict:
    return {
        "name": f"bench-{mode}",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "acquisition": "qb-mgp",
        "max_labels": max_labels,
        "mcmc": dict(mcmc),
        "mode": mode,
        "max_pending": 1_000,
        "seed": 3,
    }


def sdk_client(client: httpx.Client) -> FbgpClient:
    """An SDK client of the same service, for waiting (the measured calls stay plain httpx)."""
    return FbgpClient(str(client.base_url), token="", timeout=client.timeout.read or 120)


def wait_model(api: FbgpClient, campaign: str, version: int, seconds: float = 600) -> None:
    api.wait_for_model(campaign, version, timeout=seconds, poll=0.05)


def import_random(client, campaign, sim, rng, n):
    x = sim.lower + rng.random((n, sim.dim)) * (sim.upper - sim.lower)
    r = client.post(
        f"/campaigns/{campaign}/observations",
        json={"x": x.tolist(), "y": sim.sample(x, rng).tolist()},
    )
    r.raise_for_status()
