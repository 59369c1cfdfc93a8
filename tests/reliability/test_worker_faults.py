"""A worker killed mid-refit (the worker and its work horse; the worker alone, whose orphaned
horse then exits; or the work horse alone): the refit is run again and the campaign reaches its
next model version, in well under 2 minutes. The worker killed with its horse is the case of
the defaults: RQ's worker TTL, the maintenance interval and the refit lease as
service/settings.py has them. The other two run with a shorter lease and maintenance every
second (FAST_REVIVAL): the same revival, taken sooner."""

import json
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

SLOW_MCMC = {"chains": 1, "warmup": 5000, "samples": 5000, "thinning": 50}
# the lease still 4 heartbeats long; an idle worker's dequeue waits worker_ttl - 15 s, so its
# maintenance runs every second (as in test_poison_jobs)
FAST_REVIVAL = {
    "refit_lease_seconds": 8,
    "heartbeat_seconds": 2,
    "maintenance_interval": 1,
    "worker_ttl": 16,
}
ARTIFACTS = Path(__file__).resolve().parents[2] / "results" / "test-artifacts"


@pytest.mark.parametrize("target", ["worker", "parent", "horse"])
def test_a_refit_whose_worker_is_killed_is_run_again(make_stack, target):
    # a killed horse leaves its worker, which runs the refit again: one worker is enough there
    workers = 1 if target == "horse" else 2
    stack = make_stack(workers=workers, **({} if target == "worker" else FAST_REVIVAL))
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        # one chain of 10,000 steps on 40 points: about 3 s on a fast core, so the kill below
        # lands inside the refit (its first 2,000 + 2,000 steps once took 1.2 s, too close)
        campaign, x, _ = slow_campaign(api, mcmc=SLOW_MCMC)
        busy = wait_for(lambda: [k for k in range(workers) if stack.horse_of(k)], seconds=60)
        k = busy[0]
        wait_for(lambda: api.get(f"/campaigns/{campaign}").json()["refit"] == "running")
        time.sleep(0.3)  # inside the refit
        status = api.get(f"/campaigns/{campaign}").json()
        assert status["refit"] == "running" and status["model_version"] is None, status
        killed = time.monotonic()
        horse = stack.horse_of(k)
        assert horse is not None
        if target == "worker":
            stack.kill_worker(k)  # SIGKILL to the worker and its work horse
        elif target == "parent":
            os.kill(stack.workers[k].pid, signal.SIGKILL)  # the horse notices and exits
            stack.workers[k].wait(timeout=30)
            wait_for(lambda: not Path(f"/proc/{horse}").exists(), seconds=10)
        else:
            os.kill(horse, signal.SIGKILL)  # the worker sees its horse die
        done = wait_for(
            lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == len(x),
            seconds=180,
            every=0.25,
        )
        recovery = time.monotonic() - killed
        assert done and recovery < 120, recovery
        if target != "horse":
            assert stack.workers[k].poll() is not None  # so the other worker ran it
        history = api.get(f"/campaigns/{campaign}/history").json()
        models = [e for e in history if e["event"] == "model"]
        assert [m["version"] for m in models] == [len(x)]  # the killed refit wrote nothing
        assert api.get(f"/campaigns/{campaign}").json()["last_error"] is None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    out = ARTIFACTS / f"recovery-{target}.json"
    out.write_text(json.dumps({"killed": target, "recovery_seconds": round(recovery, 1)}))
    print(f"killed the {target} mid-refit: next model after {recovery:.1f} s")
