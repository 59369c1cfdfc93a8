"""Writes ``store_<commit>.json``: a store written by the service at an earlier commit
(``store_d84e063.json``, ``store_85c3182.json``), for ``tests/service/store/test_store.py`` to
read with the code of today.

Run it in a checkout of that commit (``git archive COMMIT | tar -x -C DIR``), with the project's
virtual environment, so that the checkout's own ``tests/conftest.py`` starts the checkout's own
API and worker: ``cd DIR && PYTHONPATH=. python PATH/TO/write_store.py OUT.json``. (For d84e063,
whose conftest lacked these helpers, this tree's conftest of that time was copied over its own.) It
starts its own redis-server, API and worker on free loopback ports and leaves, in one store:

- ``running``: its design labeled, its refit running when its worker was killed (SIGKILL);
- ``queued``: its design labeled, its refit queued in RQ with no worker to take it;
- ``tickets``: one label, a failed run, an abandoned run and a ticket out (its ``/next`` sent
  with an Idempotency-Key);
- ``team``: a campaign of team ``lab`` (created with the team's token), one label and a ticket
  out.

The file holds every key but RQ's worker registrations (``DUMP``, base64), the tokens the test
needs (a store keeps only their digests) and the tickets left out (``out``).
"""

from __future__ import annotations

import base64
import json
import math
import signal
import sys
import tempfile
import time
from pathlib import Path

import httpx
from redis import Redis

from tests.conftest import _campaign_body, start_api, start_redis, start_worker, stop

ADMIN = "service-token-of-the-store-from-d84e063"


def f(x: list[float]) -> float:
    """What the campaigns' simulator answers."""
    return math.sin(3 * x[0]) + 0.1 * x[0]


def next_label(api: httpx.Client, campaign: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    point = api.get(f"/campaigns/{campaign}/next", headers=headers).json()
    r = api.post(
        f"/campaigns/{campaign}/label",
        headers=headers,
        json={"ticket": point["ticket"], "y": f(point["x"])},
    )
    r.raise_for_status()


def ticket(api: httpx.Client, campaign: str, token: str, key: str | None = None) -> dict:
    """A ticket ``/next`` hands out: ``{ticket, x, expires_at, model_version}``."""
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return api.get(f"/campaigns/{campaign}/next", headers=headers).json()


def main(out: Path) -> None:
    data = Path(tempfile.mkdtemp())
    redis_process, url = start_redis(data)
    redis = Redis.from_url(url)
    api_process, api_url = start_api(url, data / "api.log", api_token=ADMIN)
    worker = start_worker(url, data / "worker.log")
    admin = {"Authorization": f"Bearer {ADMIN}"}
    tokens = {}
    try:
        with httpx.Client(base_url=api_url, headers=admin, timeout=60) as api:
            team = api.post("/teams", json={"name": "lab"}).json()["token"]

            def create(name: str, token: str = ADMIN, **changes) -> str:
                body = _campaign_body(name=name, max_labels=5, **changes)
                r = api.post("/campaigns", json=body, headers={"Authorization": f"Bearer {token}"})
                r.raise_for_status()
                body = r.json()
                tokens[name] = {
                    "id": body["id"],
                    "token": body["token"],
                    "owner_token": body["owner_token"],
                }
                return body["id"]

            # long enough a refit to be caught running
            running = create("running", mcmc={"chains": 2, "warmup": 1500, "samples": 1500})
            for _ in range(3):
                next_label(api, running, tokens["running"]["token"])
            state = f"fbgp:c:{running}:state"
            deadline = time.monotonic() + 120
            while redis.hget(state, "refit") != b"running":
                assert time.monotonic() < deadline, "the refit did not start"
                time.sleep(0.01)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            queued = create("queued")
            for _ in range(3):
                next_label(api, queued, tokens["queued"]["token"])
            assert redis.hget(f"fbgp:c:{queued}:state", "refit") == b"queued"
            out_c = create("tickets")
            token = tokens["tickets"]["token"]
            headers = {"Authorization": f"Bearer {token}"}
            next_label(api, out_c, token)
            failed = ticket(api, out_c, token)["ticket"]
            api.post(
                f"/campaigns/{out_c}/fail",
                headers=headers,
                json={"ticket": failed, "reason": "the mesh did not converge"},
            ).raise_for_status()
            abandoned = ticket(api, out_c, token)["ticket"]
            api.post(
                f"/campaigns/{out_c}/abandon", headers=headers, json={"ticket": abandoned}
            ).raise_for_status()
            tokens["tickets"]["out"] = ticket(api, out_c, token, key="request-of-d84e063")
            of_team = create("team", team)
            next_label(api, of_team, tokens["team"]["token"])
            tokens["team"]["out"] = ticket(api, of_team, tokens["team"]["token"])
        entries = []
        for key in sorted(redis.scan_iter("*")):
            if key.startswith(b"rq:worker") or key.startswith(b"rq:workers"):
                continue
            pttl = redis.pttl(key)
            entries.append(
                {
                    "key": base64.b64encode(key).decode(),
                    "dump": base64.b64encode(redis.dump(key)).decode(),
                    "pttl": max(pttl, 0),
                }
            )
        out.write_text(
            json.dumps(
                {
                    "admin_token": ADMIN,
                    "team_token": team,
                    "campaigns": tokens,
                    "written_at": time.time(),
                    "keys": entries,
                },
                indent=1,
            )
            + "\n"
        )
    finally:
        if worker.poll() is None:
            stop(worker)
        stop(api_process)
        stop(redis_process)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
