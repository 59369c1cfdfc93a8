"""The campaign page for an engineer (:mod:`service.campaign_page`) over HTTP, against the real
Redis and worker: a 1-input, a 3-input mixed (float, int, choice; a failed run) and a 2-output
campaign (with units). The page's sections and titles, each picture kind served as a PNG, the
two inputs chosen by the page's form, the 4xx of the pictures that cannot be, and each
output's accuracy estimates kept in the history."""

import math
import re

from tests.service.conftest import wait_for_model

MCMC = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}
MIXED = [
    {"name": "load", "lower": 0.0, "upper": 10.0},
    {"name": "thickness", "type": "int", "lower": 1, "upper": 4},
    {"name": "material", "type": "choice", "values": ["steel", "aluminium"]},
]
PNG = b"\x89PNG\r\n\x1a\n"


def _plate(x: list) -> float:
    load, thickness, material = x
    return load / thickness**2 * (1.0 if material == "steel" else 2.5) + math.sin(load)


def _campaign(client, make_body, f, labels: int, fail_first: bool = False, **changes) -> str:
    """A campaign labeled by ``f`` to its model ``labels`` (its first run failed, if asked)."""
    body = make_body(max_labels=labels + 2, mcmc=MCMC, seed=3, **changes)
    campaign = client.post("/campaigns", json=body).json()["id"]
    if fail_first:
        ticket = client.get(f"/campaigns/{campaign}/next").json()["ticket"]
        reason = {"ticket": ticket, "reason": "buckled"}
        assert client.post(f"/campaigns/{campaign}/fail", json=reason).status_code == 201
    for _ in range(labels):
        point = client.get(f"/campaigns/{campaign}/next", params={"wait": 30}).json()
        r = client.post(
            f"/campaigns/{campaign}/label", json={"ticket": point["ticket"], "y": f(point["x"])}
        )
        assert r.status_code == 201, r.text
    wait_for_model(client, campaign, labels)
    return campaign


def _png(client, campaign: str, kind: str, **params) -> bytes:
    r = client.get(f"/campaigns/{campaign}/plots/{kind}.png", params=params)
    assert r.status_code == 200, (kind, params, r.text)
    assert r.content.startswith(PNG)
    return r.content


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2 id='([^']+)'", page)


def test_a_one_input_campaign_page(client, make_body):
    """One input: the model, the accuracy, the diagnostics; no main effects or indices on the
    page (the model is its one main effect), though the pictures are served; no picture over
    two inputs (404)."""
    campaign = _campaign(client, make_body, lambda x: math.sin(3 * x[0]), 4)
    page = client.get(f"/campaigns/{campaign}/view").text
    assert _sections(page) == ["model", "accuracy", "diagnostics"]
    assert "id='plot-model'" in page and "plot-effects" not in page and "pair-form" not in page
    assert page.index("id='diagnostics'") < page.index("id='plot-posterior'")
    for kind in ("model", "effects", "sobol", "accuracy", "posterior"):
        _png(client, campaign, kind)
    r = client.get(f"/campaigns/{campaign}/plots/pair.png")
    assert r.status_code == 404 and "two numeric inputs" in r.text


def test_a_mixed_campaign_page(client, make_body):
    """Float, int and choice inputs: main effects, Sobol bars and the model over two numeric
    inputs (the first two, or the page's choice), the failed run with its inputs' names, the
    posterior below in Diagnostics; a picture over a choice input or one input twice is 422,
    an unknown kind 404."""
    campaign = _campaign(
        client,
        make_body,
        _plate,
        6,
        fail_first=True,
        inputs=MIXED,
        pool={"type": "grid", "points_per_dim": 6},
    )
    page = client.get(f"/campaigns/{campaign}/view").text
    assert _sections(page) == ["model", "accuracy", "failed-runs", "diagnostics"]
    for kind in ("effects", "sobol", "pair", "posterior"):
        assert f"id='plot-{kind}'" in page
    assert "plot-model" not in page  # three inputs: no mode GP over all of them
    assert page.index("id='plot-pair'") < page.index("id='diagnostics'")
    assert page.index("id='diagnostics'") < page.index("id='plot-posterior'")
    assert "horizontal=load&amp;vertical=thickness" in page
    assert re.search(r"<td>load=[0-9.]+, thickness=\d, material=(steel|aluminium)</td>", page)
    assert "<select name='horizontal'>" in page and "material</option>" not in page
    drawn = {kind: _png(client, campaign, kind) for kind in ("effects", "sobol", "pair")}
    chosen = _png(client, campaign, "pair", horizontal="thickness", vertical="load")
    assert chosen != drawn["pair"]
    page = client.get(
        f"/campaigns/{campaign}/view", params={"horizontal": "thickness", "vertical": "load"}
    ).text
    assert "horizontal=thickness&amp;vertical=load" in page
    assert "<option value='thickness' selected>" in page
    page = client.get(
        f"/campaigns/{campaign}/view", params={"horizontal": "material", "vertical": "load"}
    ).text
    assert "not a choice input" in page and "horizontal=load&amp;vertical=thickness" in page
    for params in (
        {"horizontal": "material"},
        {"horizontal": "load", "vertical": "load"},
        {"vertical": "nope"},
    ):
        r = client.get(f"/campaigns/{campaign}/plots/pair.png", params=params)
        assert r.status_code == 422, (params, r.text)
    assert client.get(f"/campaigns/{campaign}/plots/shap.png").status_code == 404


def test_a_two_output_campaign_page(client, make_body):
    """Two outputs (one with units): a section per output titled with its name and units,
    each output's main effects, indices and model over two inputs served; the accuracy
    estimates of each output kept in the history for its own panel."""
    outputs = [{"name": "stress", "units": "MPa"}, {"name": "disp"}]
    campaign = _campaign(
        client,
        make_body,
        lambda x: {"stress": 100 * _plate(x), "disp": 0.01 * x[0] * x[1]},
        6,
        inputs=MIXED,
        outputs=outputs,
        pool={"type": "grid", "points_per_dim": 6},
    )
    page = client.get(f"/campaigns/{campaign}/view").text
    assert _sections(page) == ["output-stress", "output-disp", "accuracy", "diagnostics"]
    assert ">stress [MPa]</h2>" in page and ">disp</h2>" in page
    for name in ("stress", "disp"):
        for kind in ("effects", "sobol", "pair", "posterior"):
            assert f"id='plot-{kind}-{name}'" in page
            _png(client, campaign, kind, output=name)
    assert "alt='stress [MPa]: main effects'" in page
    _png(client, campaign, "accuracy")
    models = [
        e for e in client.get(f"/campaigns/{campaign}/history").json() if e["event"] == "model"
    ]
    assert set(models[-1]["outputs"]) == {"stress", "disp"}
    assert models[-1]["outputs"]["stress"]["loo_rmse"] > models[-1]["outputs"]["disp"]["loo_rmse"]
    r = client.get(f"/campaigns/{campaign}/plots/effects.png", params={"output": "strain"})
    assert r.status_code == 404
