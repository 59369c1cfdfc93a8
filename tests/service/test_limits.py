"""Limits on one campaign's work (``Settings.limit_*``): a campaign or a request beyond one is a
422 that names the limit and its variable, and nothing is stored; what the presets, the paper's
protocol and the tooling send stays within them."""

from fbgp_al.clients.ops import adversarial, soak
from fbgp_al.clients.reproduction.protocol import ITERATIONS, campaign_body
from fbgp_al.clients.reproduction.runs import paper_body
from fbgp_al.service import limits
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import Settings
from fbgp_al.worker.vocabulary.defaults import MCMC_PRESETS, PAPER_ACQUISITIONS


def _rejected(r, name: str) -> str:
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert name in detail and f"FBGP_{name.upper()}" in detail, detail
    return detail


def _no_campaign(client):
    assert client.get("/campaigns").json() == []


def test_the_largest_mcmc_is_refused(client, make_body):
    # 32 chains x (10,000 warm-up + 10,000 draws): 640,000 NUTS iterations in one refit
    mcmc = {"chains": 32, "warmup": 10_000, "samples": 10_000, "thinning": 10}
    detail = _rejected(
        client.post("/campaigns", json=make_body(mcmc=mcmc)), "limit_mcmc_iterations"
    )
    assert "640,000" in detail
    # sampling to a target counts max_samples, the most draws a chain may run
    target = {"chains": 32, "warmup": 1000, "draws": 150, "max_samples": 100_000}
    _rejected(client.post("/campaigns", json=make_body(mcmc=target)), "limit_mcmc_iterations")
    _no_campaign(client)
    for name, preset in MCMC_PRESETS.items():
        r = client.post("/campaigns", json=make_body(mcmc=preset, name=name))
        assert r.status_code == 201, (name, r.text)


def test_what_the_protocol_and_the_tooling_send_is_within_the_limits():
    settings = Settings()
    bodies = [campaign_body(sim, acq, 0) for sim in ITERATIONS for acq in PAPER_ACQUISITIONS]
    bodies += [
        paper_body(sim, "qb-mgp", 0, mcmc=preset, allow_repeats=True)
        for sim in ITERATIONS
        for preset in ("paper", "paper-grid", "fast")
    ]
    bodies += [soak.campaign_body(i, 2, 0, 270) for i in range(3)]
    bodies += [adversarial.well_behaved_body(0), *adversarial.greedy_bodies(settings, 0).values()]
    for body in bodies:
        limits.check_campaign(CampaignCreate(**body).model_dump(), settings)


def test_labels_beyond_the_limit_are_refused(client, make_body):
    r = client.post("/campaigns", json=make_body(max_labels=100_000, allow_repeats=True))
    _rejected(r, "limit_labels")
    _no_campaign(client)


def test_an_import_beyond_the_label_limit_is_refused_and_stores_nothing(client, make_body):
    body = make_body(max_labels=2_000, allow_repeats=True)
    campaign = client.post("/campaigns", json=body).json()["id"]
    rows = 100_000
    x = [[0.5 + 2.0 * k / rows] for k in range(rows)]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": [1.0] * rows})
    detail = _rejected(r, "limit_labels")
    assert "100,000" in detail
    assert client.get(f"/campaigns/{campaign}/observations").json()["y"] == []
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 0


def test_an_import_counts_the_labels_stored(client, make_body, settings):
    settings.limit_labels = 10
    campaign = client.post("/campaigns", json=make_body(max_labels=10)).json()["id"]
    x = [[0.5 + 0.2 * k] for k in range(8)]
    r = client.post(f"/campaigns/{campaign}/observations", json={"x": x, "y": [0.0] * 8})
    assert r.status_code == 201, r.text
    r = client.post(
        f"/campaigns/{campaign}/observations", json={"x": [[2.45], [2.47], [2.49]], "y": [1.0] * 3}
    )
    _rejected(r, "limit_labels")
    assert client.get(f"/campaigns/{campaign}").json()["n_labeled"] == 8


def test_scoring_work_beyond_the_limit_is_refused(client, make_body):
    # a pool subsample of a million on a grid of 10^8, scored with 150 draws
    big = {
        "inputs": [{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(4)],
        "pool": {"type": "grid", "points_per_dim": 100},
    }
    body = make_body(**big, pool_subsample=1_000_000, acquisition="bald", mcmc={})
    detail = _rejected(client.post("/campaigns", json=body), "limit_scoring_work")
    assert "1,000,000 candidates" in detail and "150 acquisition draws" in detail
    # a pool smaller than the subsample scores what it has
    small = make_body(pool_subsample=1_000_000, mcmc={})
    assert client.post("/campaigns", json=small).status_code == 201


def test_pending_fantasies_beyond_the_limit_are_refused(client, make_body):
    body = make_body(mode="parallel", max_pending=10_000, acquisition="bald")
    _rejected(client.post("/campaigns", json=body), "limit_pending")
    # `random` scores no fantasies, and a sequential campaign has one point out at most
    for changes in ({"acquisition": "random"}, {"mode": "sequential"}):
        r = client.post("/campaigns", json={**body, **changes})
        assert r.status_code == 201, (changes, r.text)


def test_an_evaluation_beyond_the_limit_is_refused(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    m = Settings().limit_evaluate_points + 1
    x = [[0.5 + 2.0 * k / m] for k in range(m)]
    r = client.post(f"/campaigns/{campaign}/evaluate", json={"x": x, "y": [0.0] * m})
    _rejected(r, "limit_evaluate_points")


def test_a_grid_too_large_is_refused(client, make_body, settings):
    inputs = [{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(10)]
    r = client.post(
        "/campaigns", json=make_body(inputs=inputs, pool={"type": "grid", "points_per_dim": 1000})
    )
    assert r.status_code == 422 and "1000^10" in r.json()["detail"], r.text
    settings.limit_grid_points = 10**6
    two = [{"name": f"x{i}", "lower": 0, "upper": 1} for i in range(2)]
    r = client.post(
        "/campaigns", json=make_body(inputs=two, pool={"type": "grid", "points_per_dim": 1001})
    )
    _rejected(r, "limit_grid_points")
    _no_campaign(client)
