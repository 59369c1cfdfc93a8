"""How each refit samples (:mod:`service.schemas.mcmc`) over HTTP: the defaults sample to a target
unless a count is named."""

from tests.service.conftest import label_design, wait_for_model


def test_mcmc_samples_to_a_target_unless_a_count_is_named(client, make_body):
    """No `mcmc`: the defaults, sampling to a target of 150 draws; a campaign that names a count
    (`samples` or `thinning`) and no `draws` samples that count; a cap below the count is 422."""
    body = make_body()
    del body["mcmc"]
    created = client.post("/campaigns", json=body).json()
    default = created["mcmc"]
    assert default["draws"] == 150 and default["target_rhat"] is None
    assert default["metric"] == "diag" and default["max_samples"] == 1000
    assert default["noise_floor"] == 1e-6
    counted = client.post("/campaigns", json=make_body(mcmc={"samples": 40})).json()["mcmc"]
    assert counted["draws"] is None and counted["samples"] == 40
    both = make_body(mcmc={"samples": 40, "draws": 20, "metric": "dense"})
    assert client.post("/campaigns", json=both).json()["mcmc"]["draws"] == 20
    waits = client.post("/campaigns", json=make_body(mcmc={"target_rhat": 1.01})).json()
    assert waits["mcmc"]["target_rhat"] == 1.01
    r = client.post("/campaigns", json=make_body(mcmc={"target_rhat": 1.0}))
    assert r.status_code == 422 and "target_rhat" in r.text
    capped = make_body(mcmc={"samples": 400, "draws": 20, "max_samples": 100})
    r = client.post("/campaigns", json=capped)
    assert r.status_code == 422 and "max_samples" in r.text
    # the worker samples the default campaign to its target, and says so
    campaign = created["id"]
    label_design(client, campaign, (0.1, 0.9, -0.4))
    wait_for_model(client, campaign, 3, seconds=120)
    model = client.get(f"/campaigns/{campaign}/model").json()
    assert len(model["acquisition_samples"]["noise"]) == 150
    assert min(model["samples"]["noise"]) >= 1e-6 and model["diagnostics"]["noise_floor"] == 1e-6
    assert "target" in model["diagnostics"], model["diagnostics"]
    assert model["diagnostics"]["target"]["rhat"] is None and model["diagnostics"]["max_rhat"] > 0
