"""Parallel mode: several simulators at once, no point out twice, every label stored once."""

import threading
import time
from itertools import pairwise

import numpy as np

from clients.simulators import get_simulator


def test_four_simulators_label_one_campaign_without_duplicates(client, make_body):
    sim = get_simulator("gramacy2d")
    body = make_body(
        inputs=sim.inputs(), pool={"type": "grid", "points_per_dim": 30}, mode="parallel",
        max_pending=4, max_labels=15, acquisition="qb-mgp",
    )  # fmt: skip
    campaign = client.post("/campaigns", json=body).json()["id"]
    lock = threading.Lock()
    out_now: set[tuple] = set()
    handed: list[tuple] = []
    created: list[int] = []
    errors: list[str] = []
    most_out = [0]

    def simulator(k: int):
        rng = np.random.default_rng(k)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = client.get(f"/campaigns/{campaign}/next", params={"wait": 5})
            if r.status_code == 410:
                return
            if r.status_code == 202:
                continue
            point = r.json()
            x = tuple(point["x"])
            with lock:
                if x in out_now:
                    errors.append(f"{x} handed out while pending")
                out_now.add(x)
                handed.append(x)
                most_out[0] = max(most_out[0], len(out_now))
            y = float(sim.sample(np.array([point["x"]]), rng)[0])
            r = client.post(
                f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": y}
            )
            with lock:
                out_now.discard(x)
                if r.status_code == 201:
                    created.append(k)
                elif r.status_code != 410:
                    errors.append(f"label answered {r.status_code}")
        errors.append("timed out")

    threads = [threading.Thread(target=simulator, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    status = client.get(f"/campaigns/{campaign}").json()
    assert status["state"] == "done" and status["n_labeled"] == 15 == len(created)
    stored = [tuple(x) for x in client.get(f"/campaigns/{campaign}/observations").json()["x"]]
    assert len(stored) == len(set(stored)) == 15  # no point labeled twice
    assert set(handed) >= set(stored)
    assert 2 <= most_out[0] <= 4  # several points out at once, never more than max_pending
    # labels kept arriving while models were fitted, yet refits ran one after another
    models = [e for e in client.get(f"/campaigns/{campaign}/history").json()
              if e["event"] == "model"]  # fmt: skip
    spans = sorted((m["started_at"], m["at"]) for m in models)
    assert len(spans) >= 3 and all(a < b for a, b in spans)
    assert all(end <= start for (_, end), (start, _) in pairwise(spans)), spans
