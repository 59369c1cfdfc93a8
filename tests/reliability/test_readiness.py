"""/readyz after Redis restarted from its append-only file: it counts the workers that run, not
the registrations the file kept of workers that have since registered again."""

import signal
import time

import httpx
import pytest
from redis import Redis
from rq import Worker

from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_readyz_counts_the_live_workers_after_redis_restarted(make_stack, sig):
    stack = make_stack(workers=2, light=False)
    redis = Redis.from_url(stack.redis_url)
    with httpx.Client(base_url=stack.url, timeout=30) as api:  # both workers busy refitting
        for _ in range(2):
            slow_campaign(api, mcmc={"chains": 1, "warmup": 6000, "samples": 6000, "thinning": 60})
    wait_for(lambda: all(stack.horse_of(k) for k in range(2)), 60)
    stack.kill_redis(sig)
    time.sleep(3.0)  # each worker finds Redis gone
    stack.start_redis()  # its append-only file replayed: the registrations of before too
    pids = sorted(w.pid for w in stack.workers)

    def ready() -> int:
        r = httpx.get(f"{stack.url}/readyz", timeout=5)
        return r.status_code == 200 and r.json()["workers"]

    # both back (each registered, again or still)
    def registered() -> list[int]:
        return sorted(w.pid for w in Worker.all(connection=redis))

    wait_for(lambda: set(registered()) == set(pids), 60)
    counts = []
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        counts.append(wait_for(ready, 30))
        time.sleep(0.5)
    assert set(counts) == {2}, counts
    assert all(stack.workers[k].poll() is None for k in range(2))
