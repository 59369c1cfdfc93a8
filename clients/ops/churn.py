"""``fbgp-al soak --churn``: what a campaign keeps in Redis per ticket that ends without a label,
and per evaluation, after many of them.

It starts its own stack (:class:`clients.ops.stack.LocalStack`: Redis with its append-only file,
the API, one worker) and runs three phases, each of ``cycles`` steps, against campaigns of its
own (1-D Gramacy & Lee, a 1001-point grid):

- ``next+abandon``: ``/next`` (with an ``Idempotency-Key``, as the SDK sends it) and
  ``/abandon`` of its ticket, in a campaign whose initial design is not labeled (no refit runs:
  the cost is the tickets');
- ``next+fail``: the same with ``/fail`` and a 200-character reason (each design point may be
  offered again after it failed, up to ``max_retries``);
- ``evaluate``: ``/evaluate`` of one test point, in a campaign with a model (``evaluations`` of
  them; the worker runs each).

Memory is measured as the sum of ``MEMORY USAGE`` over the campaign's keys, at the start of a
phase, half-way and at its end (and Redis's ``used_memory``, which the allocator blurs): bytes
per step over the whole phase and over its second half, which stays near zero once what a
campaign keeps is bounded. ``--set NAME=VALUE`` passes a setting (``FBGP_NAME``) to the stack,
e.g. a smaller bound to reach it in fewer steps.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from redis import Redis

from fbgp_al.clients.client import FbgpClient
from fbgp_al.clients.ops.stack import LocalStack, fbgp_env
from fbgp_al.clients.simulators import get_simulator
from fbgp_al.service import keys

REASON = "solver diverged at step 4181: " + "residual above tolerance; " * 7  # ~200 characters
MCMC = {"chains": 1, "warmup": 30, "samples": 20, "thinning": 1}


def churn_body(design: int = 20) -> dict:
    """A campaign whose ``design`` points each may fail up to 1000 times, with no failure limit
    in reach, so that its tickets can be ended again and again."""
    sim = get_simulator("gramacy1d")
    return {
        "name": "churn",
        "inputs": sim.inputs(),
        "pool": {"type": "grid", "points_per_dim": 1001},
        "acquisition": "random",
        "initial_design": {"type": "maximin-lhs", "size": design},
        "max_labels": 2 * design,
        "max_retries": 1000,
        "max_failures": 10_000_000,
        "mcmc": dict(MCMC),
        "lease_seconds": 600,
        "seed": 0,
    }


def campaign_bytes(redis: Redis, campaign: str) -> int:
    """The bytes Redis holds for ``campaign``'s keys (``MEMORY USAGE``, every element counted)."""
    return sum(
        redis.memory_usage(key, samples=0) or 0
        for key in redis.scan_iter(keys.campaign_keys(campaign), count=1000)
    )


def _used_memory(redis: Redis) -> int:
    return int(redis.info("memory")["used_memory"])


def _phase(
    name: str,
    steps: int,
    step: Callable[[int], None],
    redis: Redis,
    campaign: str,
    progress: Callable[[str], None],
) -> dict:
    """Run ``step(i)`` ``steps`` times, measuring ``campaign``'s bytes at the start, half-way
    and at the end."""
    marks, used, times = [campaign_bytes(redis, campaign)], [_used_memory(redis)], []
    half = steps // 2
    started = time.monotonic()
    for i in range(steps):
        if i == half:
            marks.append(campaign_bytes(redis, campaign))
            used.append(_used_memory(redis))
        t = time.monotonic()
        step(i)
        times.append(time.monotonic() - t)
        if (i + 1) % max(1, steps // 10) == 0:
            progress(
                f"churn: {name} {i + 1}/{steps}, campaign {campaign_bytes(redis, campaign):,} bytes"
            )
    marks.append(campaign_bytes(redis, campaign))
    used.append(_used_memory(redis))
    second = steps - half
    return {
        "phase": name,
        "steps": steps,
        "seconds": round(time.monotonic() - started, 1),
        "campaign_bytes": marks,
        "used_memory": used,
        "bytes_per_step": round((marks[2] - marks[0]) / steps, 1),
        "bytes_per_step_second_half": round((marks[2] - marks[1]) / second, 1),
        "used_memory_per_step": round((used[2] - used[0]) / steps, 1),
    }


def run_churn(
    cycles: int = 2000,
    evaluations: int = 300,
    data_dir: Path | None = None,
    settings: dict | None = None,
    progress: Callable[[str], None] = print,
) -> dict:
    """The three phases (module docstring) on one stack; the figures as a dict."""
    settings = dict(settings or {})
    with contextlib.ExitStack() as cleanup:
        if data_dir is None:
            data_dir = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="churn-")))
        stack = LocalStack(Path(data_dir), workers=1, env=fbgp_env(**settings))
        try:
            stack.start()
            with FbgpClient(stack.url, token="", timeout=60.0) as api:
                redis = stack.client()
                phases = _phases(api, redis, cycles, evaluations, progress)
        finally:
            stack.stop()
    return {"cycles": cycles, "evaluations": evaluations, "settings": settings, "phases": phases}


def _phases(
    api: FbgpClient, redis: Redis, cycles: int, evaluations: int, progress: Callable[[str], None]
) -> list[dict]:
    out = []
    for kind in ("abandon", "fail"):
        campaign = api.create_campaign(churn_body()).id

        def cycle(i: int, campaign=campaign, kind=kind) -> None:
            point = api.try_next(campaign)
            if kind == "abandon":
                api.abandon(campaign, point.ticket)
            else:
                api.fail(campaign, point.ticket, f"{i} {REASON}")

        out.append(_phase(f"next+{kind}", cycles, cycle, redis, campaign, progress))
    if evaluations:
        sim = get_simulator("gramacy1d")
        campaign = api.create_campaign(dict(churn_body(3), max_labels=6)).id
        for _ in range(3):
            point = api.try_next(campaign)
            api.label(campaign, point.ticket, float(sim.mean([point.x])[0]))
        api.wait_for_model(campaign, 3, timeout=300)

        def evaluate(i: int) -> None:
            x = 0.5 + 2.0 * (i % 997) / 997
            api.evaluate(campaign, [[x]], [float(sim.mean([[x]])[0])])

        out.append(_phase("evaluate", evaluations, evaluate, redis, campaign, progress))
    return out


def summary(report: dict) -> str:
    lines = [
        f"soak --churn: {report['cycles']} cycles, {report['evaluations']} evaluations, "
        f"settings {report['settings'] or 'default'}"
    ]
    for p in report["phases"]:
        first, half, last = p["campaign_bytes"]
        per, second, used = (
            p["bytes_per_step"],
            p["bytes_per_step_second_half"],
            p["used_memory_per_step"],
        )
        lines.append(
            f"  {p['phase']:13s} {p['steps']:6d} steps in {p['seconds']:6.1f} s: "
            f"campaign {first:,} -> {half:,} -> {last:,} bytes; {per:.0f} bytes/step, "
            f"{second:.0f} in the second half (used_memory {used:.0f})"
        )
    return "\n".join(lines)
