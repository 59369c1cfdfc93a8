"""Redis and the API killed and started again: every acknowledged label is still there, the API
says so on /readyz meanwhile and recovers by itself, and tickets stay valid."""

import time

import httpx
import pytest

from tests.reliability.conftest import wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

BODY = {
    "name": "restarts",
    "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
    "pool": {"type": "grid", "points_per_dim": 101},
    "initial_design": {"type": "maximin-lhs", "size": 3},
    "max_labels": 30,
    "mcmc": {"chains": 2, "warmup": 40, "samples": 20, "thinning": 2},
    "mode": "parallel",
    "max_pending": 4,
    "seed": 2,
}


def _label_next(api: httpx.Client, campaign: str, y: float) -> tuple[str, int]:
    point = wait_for(
        lambda: (
            (r := api.get(f"/campaigns/{campaign}/next", params={"wait": 5})).status_code == 200
            and r.json()
        )
    )
    r = api.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})
    assert r.status_code == 201, r.text
    return point["ticket"], r.json()["n_labeled"]


def test_redis_killed_right_after_acknowledged_labels_loses_none(make_stack):
    stack = make_stack(workers=1)
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        campaign = api.post("/campaigns", json=BODY).json()["id"]
        acknowledged = [0.25 * k - 1.0 for k in range(8)]
        for y in acknowledged[:4]:
            _label_next(api, campaign, y)
        imported = {"x": [[0.61], [1.97]], "y": [3.5, -2.25]}
        assert api.post(f"/campaigns/{campaign}/observations", json=imported).status_code == 201
        for y in acknowledged[4:]:
            _label_next(api, campaign, y)
        stack.kill_redis()  # SIGKILL, straight after the last 201

        down = api.get("/readyz")
        assert down.status_code == 503 and not down.json()["ready"]
        r = api.get(f"/campaigns/{campaign}")
        assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json"
        assert "unreachable" in r.json()["detail"] and r.headers["Retry-After"]

        stack.start_redis()  # same port and directory: the append-only file is replayed
        wait_for(lambda: api.get("/readyz").status_code == 200, seconds=120)
        stored = api.get(f"/campaigns/{campaign}/observations").json()
        assert sorted(stored["y"]) == sorted(acknowledged + imported["y"])
        n = len(stored["y"])
        # the worker came back too: a new label gets its model
        _, n = _label_next(api, campaign, 0.5)
        wait_for(
            lambda: api.get(f"/campaigns/{campaign}").json()["model_version"] == n, seconds=120
        )


def test_api_killed_and_restarted_keeps_tickets_valid(make_stack):
    stack = make_stack(workers=1)
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        campaign = api.post("/campaigns", json=BODY).json()["id"]
        tickets = [api.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(3)]
        before = api.get(f"/campaigns/{campaign}").json()
        stack.kill_api()
        started = time.monotonic()
        stack.start_api()
        print(f"API back after {time.monotonic() - started:.1f} s")
        assert api.get(f"/campaigns/{campaign}").json() == before  # it held no state
        for k, ticket in enumerate(tickets):
            r = api.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": float(k)})
            assert r.status_code == 201, r.text
        assert api.get(f"/campaigns/{campaign}/observations").json()["y"] == [0.0, 1.0, 2.0]


def test_readyz_counts_a_killed_and_restarted_worker_once(make_stack):
    """A worker killed without a word leaves its RQ registration behind (until its key expires,
    and in the append-only file across restarts of the stack): the stack unregisters it, so
    /readyz counts the workers that run."""
    from redis import Redis
    from rq import Worker

    stack = make_stack(workers=1)

    def registered() -> list[int]:
        with Redis.from_url(stack.redis_url) as connection:
            return sorted(w.pid for w in Worker.all(connection=connection))

    def workers_once_the_new_one_registered() -> int:
        wait_for(lambda: stack.workers[0].pid in registered(), seconds=60)
        return httpx.get(f"{stack.url}/readyz", timeout=5).json()["workers"]

    killed = stack.workers[0].pid
    stack.kill_worker(0)
    assert stack.restart_dead() == ["worker-0"]
    assert workers_once_the_new_one_registered() == 1
    assert registered() == [stack.workers[0].pid] and killed not in registered()

    killed = stack.workers[0].pid  # now the whole stack, as a power cut would
    for child in stack.children():
        child.kill()
        child.wait()
    stack.start()
    assert workers_once_the_new_one_registered() == 1
    assert registered() == [stack.workers[0].pid]
