"""Parallel mode: several points out at once (up to max_pending), never one twice, and several
simulators labeling at once store every label once while refits run one after another."""

import threading
import time
from itertools import pairwise

import numpy as np

from clients.simulators import get_simulator


def _next(client, campaign: str, wait: float = 0.0):
    return client.get(f"/campaigns/{campaign}/next", params={"wait": wait})


def _label(client, campaign: str, point: dict, y: float):
    return client.post(f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y})


def test_four_simulators_label_one_campaign_without_duplicates(client, make_body):
    sim = get_simulator("gramacy2d")
    body = make_body(
        inputs=sim.inputs(), pool={"type": "grid", "points_per_dim": 30}, mode="parallel",
        max_pending=4, max_labels=15, acquisition="qb-mgp",
    )  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    rng = np.random.default_rng(0)

    def f(x: list[float]) -> float:
        return float(sim.sample(np.array([x]), rng)[0])

    # The initial design is out at once; nothing more until it is labeled and a model chose.
    design = [_next(client, campaign).json() for _ in range(3)]
    assert len({tuple(p["x"]) for p in design}) == 3
    assert _next(client, campaign).status_code == 202
    for point in design:
        assert _label(client, campaign, point, f(point["x"])).status_code == 201
    # Then max_pending points are out at once, all different, and no more than that.
    first = _next(client, campaign, wait=60)
    assert first.status_code == 200, first.text
    batch = [first.json()] + [_next(client, campaign).json() for _ in range(3)]
    assert len({tuple(p["x"]) for p in batch}) == 4
    assert not {tuple(p["x"]) for p in batch} & {tuple(p["x"]) for p in design}
    full = _next(client, campaign)
    assert full.status_code == 202 and "Retry-After" in full.headers

    # Four simulators, each starting with one point of the batch, label to the end at once.
    lock = threading.Lock()
    out_now: set[tuple] = {tuple(p["x"]) for p in batch}
    created: list[int] = []
    errors: list[str] = []
    most_out = [len(out_now)]

    def simulator(k: int, point: dict):
        pause = np.random.default_rng(k)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(pause.uniform(0.0, 0.05))  # a simulation takes a moment
            r = _label(client, campaign, point, f(point["x"]))
            with lock:
                out_now.discard(tuple(point["x"]))
                if r.status_code == 201:
                    created.append(k)
                else:
                    errors.append(f"label answered {r.status_code}: {r.text}")
            while time.monotonic() < deadline:
                r = _next(client, campaign, wait=5)
                if r.status_code == 410:
                    return
                if r.status_code == 200:
                    break
                if r.status_code != 202:
                    errors.append(f"next answered {r.status_code}: {r.text}")
                    return
            point = r.json()
            x = tuple(point["x"])
            with lock:
                if x in out_now:
                    errors.append(f"{x} handed out while pending")
                out_now.add(x)
                most_out[0] = max(most_out[0], len(out_now))
        errors.append("timed out")

    threads = [threading.Thread(target=simulator, args=(k, p)) for k, p in enumerate(batch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert most_out[0] <= 4  # never more than max_pending
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "done" and status["n_labeled"] == 15 == 3 + len(created)
    stored = [tuple(x) for x in client.get(f"/campaigns/{campaign}/observations").json()["x"]]
    assert len(stored) == len(set(stored)) == 15  # no point labeled twice
    # labels kept arriving while models were fitted, yet refits ran one after another; a batch
    # holds at most 4 points, so the 12 labels after the design needed at least 3 models
    models = [e for e in client.get(f"/campaigns/{campaign}/history").json()
              if e["event"] == "model"]  # fmt: skip
    spans = sorted((m["started_at"], m["at"]) for m in models)
    assert len(spans) >= 3 and all(a < b for a, b in spans)
    assert all(end <= start for (_, end), (start, _) in pairwise(spans)), spans
