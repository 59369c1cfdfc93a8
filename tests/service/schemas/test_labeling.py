"""The labeling loop's bodies (:mod:`service.schemas.labeling`) over HTTP: a label or an imported y
must be a number within the range the GP can scale."""

import math

from tests.service.conftest import wait_for_model


def test_outputs_are_numbers_within_a_range_the_gp_can_scale(client, make_body):
    """A label or an imported y that is a string, a boolean, or beyond +-1e150 (whose squared
    scale would overflow float64, and make a model with infinite variances) is a 422 that says
    why; the campaign goes on with its valid labels."""
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    tickets = [client.get(f"/campaigns/{campaign}/next").json()["ticket"] for _ in range(3)]
    for y in ("1.5", True, -1e308, 1e151):
        r = client.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[0], "y": y})
        assert r.status_code == 422, (y, r.text)
        r = client.post(f"/campaigns/{campaign}/observations", json={"x": [[1.0]], "y": [y]})
        assert r.status_code == 422, (y, r.text)
    r = client.post(f"/campaigns/{campaign}/label", json={"ticket": tickets[0], "y": 1e151})
    assert "1e+150" in r.text and "rescale" in r.text
    for ticket, y in zip(tickets, (1.5, -1e150, 0), strict=True):  # the edge itself is fine
        assert (
            client.post(f"/campaigns/{campaign}/label", json={"ticket": ticket, "y": y}).status_code
            == 201
        )
    wait_for_model(client, campaign, 3)
    model = client.get(f"/campaigns/{campaign}/model")
    assert model.status_code == 200, model.text
    p = client.post(f"/campaigns/{campaign}/predict", json={"x": [[1.0], [2.0]]})
    assert p.status_code == 200 and all(math.isfinite(v) for v in p.json()["variance"]), p.text
