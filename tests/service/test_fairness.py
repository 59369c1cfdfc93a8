"""Campaigns share the workers: a busy campaign's next refit queues behind the others'."""

import time


def test_a_campaigns_next_refit_waits_behind_other_campaigns(client, make_body):
    mcmc = {"chains": 2, "warmup": 150, "samples": 100, "thinning": 5}
    a = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
    b = client.post("/campaigns", json=make_body(max_labels=20, mcmc=mcmc)).json()["id"]
    points = [[0.6], [1.1], [1.7], [2.3]]

    def add(campaign, k):
        body = (
            {"x": [points[k % 4]], "y": [0.1 * k]}
            if k >= 4
            else {"x": points, "y": [0.1, 0.3, -0.2, 0.5]}
        )
        assert client.post(f"/campaigns/{campaign}/observations", json=body).status_code == 201

    add(a, 0)  # A's first refit is queued (or running)
    add(b, 0)  # B's first refit queues behind it
    for k in range(4, 8):  # A keeps getting labels: one more refit, coalesced, after B's
        add(a, k)
    deadline = time.monotonic() + 120
    while client.get(f"/campaigns/{a}").json()["model_version"] != 8:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    times_a = [
        e["at"] for e in client.get(f"/campaigns/{a}/history").json() if e["event"] == "model"
    ]
    times_b = [
        e["at"] for e in client.get(f"/campaigns/{b}/history").json() if e["event"] == "model"
    ]
    assert len(times_b) == 1 and len(times_a) == 2  # A's four labels made one refit, not four
    assert times_a[0] < times_b[0] < times_a[1]
