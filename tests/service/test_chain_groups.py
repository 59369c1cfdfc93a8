"""With two workers a refit's chains run as two jobs and a merge; the result is reproducible."""

import time


def _model_after_import(client, make_body):
    body = make_body(max_labels=10, mcmc={"chains": 4, "warmup": 40, "samples": 30, "thinning": 3})
    campaign = client.post("/campaigns", json=body).json()["id"]
    x, y = [[0.6], [1.1], [1.7], [2.3]], [0.1, -0.2, 0.5, 2.0]
    assert (
        client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": y}).status_code == 201
    )
    deadline = time.monotonic() + 120
    while client.get(f"/campaigns/{campaign}").json()["model_version"] != 4:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return client.get(f"/campaigns/{campaign}/model").json()


def test_chains_are_split_over_two_workers_and_reproducible(client, make_body, second_worker):
    first = _model_after_import(client, make_body)
    second = _model_after_import(client, make_body)
    for model in (first, second):
        assert model["diagnostics"]["chain_groups"] == 2 and model["chains"] == 4
        assert len(model["samples"]["noise"]) == 4 * 30
    # the same seed and the same grouping: the same draws, whichever worker ran which group
    assert first["samples"] == second["samples"]
    # a split refit's seconds run from its start, its groups included, to its model
    campaign = client.get("/campaigns").json()[-1]["id"]
    event = next(e for e in client.get(f"/campaigns/{campaign}/history").json()
                 if e["event"] == "model")  # fmt: skip
    assert abs((event["at"] - event["started_at"]) - event["refit_seconds"]) < 0.5, event
