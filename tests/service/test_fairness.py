"""Campaigns share the workers: a busy campaign's next refit queues behind the others'."""

import time

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
