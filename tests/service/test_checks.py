"""What the routes check of a request's values against its campaign
(:mod:`service.checks`), over HTTP: points that do not fit the inputs are 422 for model
calls and imports, and noise variances sent to a campaign that learns its noise are 422."""


def test_bad_points_for_model_calls_and_imports(client, make_body):
    campaign = client.post("/campaigns", json=make_body()).json()["id"]
    for path in ("predict", "acquisition"):
        assert client.post(f"/campaigns/{campaign}/{path}", json={"x": [[9.0]]}).status_code == 422
        assert (
            client.post(f"/campaigns/{campaign}/{path}", json={"x": [[1.0, 1.0]]}).status_code
            == 422
        )
        assert client.post(f"/campaigns/{campaign}/{path}", json={"x": []}).status_code == 422
    url = f"/campaigns/{campaign}/observations"
    assert client.post(url, json={"x": [[3.0]], "y": [1.0]}).status_code == 422
    assert client.post(url, json={"x": [[1.0]], "y": [1.0, 2.0]}).status_code == 422
    r = client.post(
        url, content='{"x": [[1.0]], "y": [NaN]}', headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 422
    bad_acq = client.post(
        f"/campaigns/{campaign}/acquisition", json={"x": [[1.0]], "acquisition": "x"}
    )
    assert bad_acq.status_code == 422
    assert client.get(f"/campaigns/{campaign}/next", params={"wait": -1}).status_code == 422
    assert client.get("/campaigns/nope/next").status_code == 404
    assert (
        client.post(
            "/campaigns", content="{not json", headers={"Content-Type": "application/json"}
        ).status_code
        == 422
    )


def _ticket(client, campaign):
    r = client.get(f"/campaigns/{campaign}/next")
    assert r.status_code == 200, r.text
    return r.json()["ticket"]


def _detail(r):
    return r.json()["detail"]


def test_a_learned_noise_campaign_refuses_noise_and_keeps_its_bodies(client, make_body):
    created = client.post("/campaigns", json=make_body())
    assert "noise" not in created.json()  # the default, written as before the option existed
    explicit = client.post("/campaigns", json=make_body(noise={"type": "learned"}))
    assert explicit.status_code == 201 and "noise" not in explicit.json()
    campaign = created.json()["id"]
    url = f"/campaigns/{campaign}/label"
    ticket = _ticket(client, campaign)
    for body in ({"y": 1.0, "noise": 0.1}, {"y_replicates": [1.0, 1.2]}):
        r = client.post(url, json={"ticket": ticket, **body})
        assert r.status_code == 422, r.text
        assert '"noise": {"type": "known"}' in _detail(r)
    ok = client.post(url, json={"ticket": ticket, "y": 1.0})
    assert ok.status_code == 201 and ok.json() == {"ticket": ticket, "y": 1.0, "n_labeled": 1}
    imports = f"/campaigns/{campaign}/observations"
    r = client.post(imports, json={"x": [[1.0]], "y": [0.2], "noise": [0.1]})
    assert r.status_code == 422 and '"noise": {"type": "known"}' in _detail(r)
    r = client.post(
        f"/campaigns/{campaign}/evaluate", json={"x": [[1.0]], "y": [0.2], "noise": [0.1]}
    )
    assert r.status_code == 422 and "noise" in _detail(r)
    observed = client.get(imports).json()
    assert set(observed) == {"x", "y", "failures"} and observed["y"] == [1.0]
    header = client.get(imports, headers={"Accept": "text/csv"}).text.splitlines()[0]
    assert header == '"x","y","status","reason"'
