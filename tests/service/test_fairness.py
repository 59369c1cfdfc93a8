"""Campaigns share the workers: a busy campaign's next refit queues behind the others'."""

import random
import time

from tests.service.conftest import label_design, wait_for_model

POINTS = [[0.6], [1.1], [1.7], [2.3]]


def test_a_campaigns_next_refit_waits_behind_other_campaigns(client, make_body):
    mcmc = {"chains": 2, "warmup": 150, "samples": 100, "thinning": 5}
    a = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
    b = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]

    def add(campaign, x, y):
        r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y})
        assert r.status_code == 201

    def wait(predicate):
        deadline = time.monotonic() + 120
        while not predicate():
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def model_times(campaign):
        history = client.get(f"/campaigns/{campaign}/history").json()
        return [e["at"] for e in history if e["event"] == "model"]

    add(a, POINTS, [0.1, 0.3, -0.2, 0.5])
    # A's first refit starts (the worker may finish other tests' jobs first)
    wait(lambda: client.get(f"/campaigns/{a}").json()["refit"] != "queued")
    add(b, POINTS, [0.1, 0.3, -0.2, 0.5])  # B's first refit queues
    for k in range(4):  # A keeps getting labels: its next refit queues behind B's
        add(a, [[0.9 + 0.3 * k]], [0.2 * k])
    wait(lambda: client.get(f"/campaigns/{a}").json()["model_version"] == 8)
    wait(lambda: client.get(f"/campaigns/{b}").json()["model_version"] == 4)
    times_a, times_b = model_times(a), model_times(b)
    assert times_b[0] < times_a[-1]  # B was not starved by A's stream of labels
    assert len(times_a) <= 3  # A's four labels were coalesced, not four more refits


def test_a_big_refit_leaves_a_worker_to_a_campaign_whose_simulator_is_out(
    client, make_body, second_worker
):
    """Two workers, both idle; B's simulator holds a ticket. A's long refit takes one worker,
    not both, so B's labels keep getting models while A refits (before, A's chains took both
    workers, and B's next model waited for one of A's chain groups)."""
    small = make_body(max_labels=40, pool={"type": "grid", "points_per_dim": 401})
    b = client.post("/campaigns", json=small).json()["id"]
    label_design(client, b, [0.1, 0.4, -0.3])
    wait_for_model(client, b, 3)
    ticket = client.get(f"/campaigns/{b}/next").json()["ticket"]  # B's simulator is out

    mcmc = {"chains": 4, "warmup": 2000, "samples": 8000, "thinning": 80}
    a = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
    x = [[0.6 + 0.2 * k] for k in range(8)]
    r = client.post(f"/campaigns/{a}/observations", json={"x": x, "y": [0.3 * k for k in range(8)]})
    assert r.status_code == 201
    deadline = time.monotonic() + 60
    while client.get(f"/campaigns/{a}").json()["refit"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.02)

    rng = random.Random(0)
    while client.get(f"/campaigns/{a}").json()["model_version"] != 8:  # B labels meanwhile
        assert time.monotonic() < deadline + 120, "A's refit did not end"
        r = client.post(f"/campaigns/{b}/label", json={"ticket": ticket, "y": rng.gauss()})
        assert r.status_code == 201, r.text
        while True:
            r = client.get(f"/campaigns/{b}/next", params={"wait": 5})
            if r.status_code == 200 or client.get(f"/campaigns/{a}").json()["model_version"] == 8:
                break
        if r.status_code != 200:
            break
        ticket = r.json()["ticket"]

    model_a = client.get(f"/campaigns/{a}/model").json()
    assert model_a["diagnostics"]["chain_groups"] == 1  # its share: one of two workers
    refit_a = next(e for e in client.get(f"/campaigns/{a}/history").json() if e["event"] == "model")
    models_b = [e for e in client.get(f"/campaigns/{b}/history").json() if e["event"] == "model"]
    during = [e for e in models_b if refit_a["started_at"] < e["at"] < refit_a["at"]]
    # B never waited for A's chains: its longest wait for a model is a small part of A's refit
    times = [refit_a["started_at"]] + [e["at"] for e in during]
    longest = max(later - earlier for earlier, later in zip(times, times[1:], strict=False))
    assert len(during) >= 3 and longest < (refit_a["at"] - refit_a["started_at"]) / 4, during
