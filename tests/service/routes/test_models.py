"""``GET /campaigns/{id}/model/export`` (:mod:`service.routes.models`) on a real API server with a
service token, Redis and worker: 404 before the first model, the owner's call only (403 for the
simulator token), a JSON download of the model with the labels it saw, from which the SDK's
``Metamodel`` predicts what ``/predict`` answers, to 1e-10, also after the campaign is deleted,
and also for an output modeled on the log scale (its lognormal moments and quantiles)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from fbgp_al.clients.client import ApiError, FbgpClient
from fbgp_al.clients.metamodel import Metamodel
from tests.conftest import start_api, stop

ROOT = Path(__file__).resolve().parents[3]
ADMIN = "service-token-for-the-export-tests"
RTOL = 1e-10
BODY = {
    "name": "export",
    "inputs": [
        {"name": "x1", "lower": -5.0, "upper": 10.0},
        {"name": "x2", "lower": 0.0, "upper": 15.0},
    ],
    "pool": {"type": "grid", "points_per_dim": 30},
    "initial_design": {"type": "maximin-lhs", "size": 6},
    "max_labels": 10,
    "mcmc": {"chains": 2, "warmup": 40, "samples": 40, "thinning": 2},
    "seed": 3,
}


def _f(x: list[float]) -> float:
    return 20.0 * math.sin(0.4 * x[0]) + 0.5 * x[1] ** 2 + 3.0


@pytest.fixture(scope="module")
def guarded(redis_url, worker_process, tmp_path_factory):
    """An API with a service token, on the tests' Redis and worker."""
    process, url = start_api(
        redis_url, tmp_path_factory.mktemp("export") / "api.log", api_token=ADMIN
    )
    yield url
    stop(process)


def _label(api: FbgpClient, campaign: str, count: int) -> None:
    for _ in range(count):
        point = api.next_point(campaign, wait=10)
        api.label(campaign, point.ticket, _f(point.x))


def test_the_exported_model_predicts_as_the_service_does(guarded, tmp_path):
    with FbgpClient(guarded, ADMIN) as admin:
        campaign = admin.create_campaign(BODY)
    cid = campaign.id
    path = f"/campaigns/{cid}/model/export"
    owner = FbgpClient(guarded, campaign.owner_token)
    simulator = FbgpClient(guarded, campaign.token)
    try:
        before = httpx.get(guarded + path, headers={"Authorization": f"Bearer {ADMIN}"})
        assert before.status_code == 404
        assert before.headers["content-type"] == "application/problem+json"
        assert "no model yet" in before.json()["detail"]

        _label(simulator, cid, 6)
        owner.wait_for_model(cid, 6, timeout=120)
        with pytest.raises(ApiError) as denied:  # the simulator's token does not open it
            simulator.export_model(cid)
        assert denied.value.status_code == 403 and "owner token" in denied.value.detail

        r = httpx.get(guarded + path, headers={"Authorization": f"Bearer {campaign.owner_token}"})
        assert r.status_code == 200
        assert r.headers["content-disposition"] == (
            f'attachment; filename="fbgp-al-{cid}-model-6.json"'
        )
        document = json.loads(r.content)
        model = owner.model(cid)
        observations = owner.observations(cid)
        assert document["format"] == "fbgp-al-metamodel" and document["format_version"] == 1
        assert document["campaign"] == {"id": cid, "name": "export"}
        assert (document["version"], document["n_labeled"]) == (model.version, 6)
        assert document["inputs"] == BODY["inputs"] and document["kernel"] == "rbf-ard"
        for key in ("transform", "samples", "acquisition_samples", "mode", "diagnostics"):
            assert document[key] == getattr(model, key), key
        assert document["data"] == {"x": observations.x[:6], "y": observations.y[:6]}
        assert "adaptation" not in document and document["exported_at"] > 0

        metamodel = Metamodel.load(document)
        rng = np.random.default_rng(0)
        lower, upper = np.array([-5.0, 0.0]), np.array([10.0, 15.0])
        corners = [[-5.0, 0.0], [-5.0, 15.0], [10.0, 0.0], [10.0, 15.0]]  # far from the labels
        x = np.concatenate([observations.x, corners, lower + rng.random((40, 2)) * (upper - lower)])
        served = owner.predict(cid, x)
        assert served.model_version == 6
        local = metamodel.predict(x)
        y_std = document["transform"]["y_std"]
        for key, scale in (
            ("mean", y_std),
            ("variance", y_std**2),
            ("mixture_mean", y_std),
            ("mixture_variance", y_std**2),
        ):
            np.testing.assert_allclose(
                local[key], getattr(served, key), rtol=RTOL, atol=RTOL * scale, err_msg=key
            )

        # the SDK's call writes the file as served; the CLI writes the same document
        saved = tmp_path / "model.json"
        assert owner.export_model(cid, saved)["version"] == 6
        assert json.loads(saved.read_bytes())["data"] == document["data"]
        cli_out = tmp_path / "cli.json"
        cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "fbgp_al.clients.ops.cli",
                "export",
                "--url",
                guarded,
                "--campaign",
                cid,
                "--token",
                campaign.owner_token,
                "--out",
                str(cli_out),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert cli.returncode == 0, cli.stderr
        assert f"model 6 of campaign {cid}" in cli.stderr
        from_cli = json.loads(cli_out.read_text())
        assert {k: v for k, v in from_cli.items() if k != "exported_at"} == {
            k: v for k, v in document.items() if k != "exported_at"
        }
        to_stdout = subprocess.run(
            [
                sys.executable,
                "-m",
                "fbgp_al.clients.ops.cli",
                "export",
                "--url",
                guarded,
                "--campaign",
                cid,
                "--token",
                campaign.owner_token,
                "--out",
                "-",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert to_stdout.returncode == 0, to_stdout.stderr
        assert json.loads(to_stdout.stdout)["data"] == document["data"]
        denied_cli = subprocess.run(
            [
                sys.executable,
                "-m",
                "fbgp_al.clients.ops.cli",
                "export",
                "--url",
                guarded,
                "--campaign",
                cid,
                "--token",
                campaign.token,
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert denied_cli.returncode != 0 and "HTTP 403" in denied_cli.stderr

        owner.delete_campaign(cid)
        with pytest.raises(ApiError) as gone:
            FbgpClient(guarded, ADMIN).export_model(cid)
        assert gone.value.status_code == 404
        # self-contained: the file predicts the same without the campaign
        again = Metamodel.load(saved).predict(x)
        for key in local:
            np.testing.assert_array_equal(again[key], local[key])
    finally:
        FbgpClient(guarded, ADMIN).delete_campaign(cid, missing_ok=True)
        owner.close()
        simulator.close()


def test_the_exported_model_of_a_log_output_predicts_as_the_service_does(guarded):
    """``"transform": "log"``: the document carries ``y_transform``, and the ``Metamodel``'s
    lognormal moments, medians and 95% intervals are ``/predict``'s (through the SDK's
    ``Prediction``), to 1e-10."""
    body = dict(BODY, name="export-log", transform="log")
    with FbgpClient(guarded, ADMIN) as api:
        campaign = api.create_campaign(body).id
        for _ in range(6):
            point = api.next_point(campaign, wait=10)
            api.label(campaign, point.ticket, math.exp(_f(point.x) / 40.0))  # 0.65 to 30
        api.wait_for_model(campaign, 6, timeout=120)
        document = api.export_model(campaign)
        assert document["transform"]["y_transform"] == "log" and document["format_version"] == 3
        rng = np.random.default_rng(1)
        lower, upper = np.array([-5.0, 0.0]), np.array([10.0, 15.0])
        x = np.concatenate(
            [[[-5.0, 0.0], [10.0, 15.0]], lower + rng.random((30, 2)) * (upper - lower)]
        )
        served = api.predict(campaign, x)
        local = Metamodel.load(document).predict(x)
        keys = (
            "mean",
            "variance",
            "mixture_mean",
            "mixture_variance",
            "median",
            "lower",
            "upper",
            "mixture_median",
            "mixture_lower",
            "mixture_upper",
        )
        assert set(served) == set(local) == set(keys)
        for key in keys:
            assert np.all(served[key] > 0), key
            np.testing.assert_allclose(local[key], served[key], rtol=RTOL, err_msg=key)
        api.delete_campaign(campaign)


def test_sensitivity_gives_each_inputs_indices_as_the_worker_computes_them(guarded, redis_url):
    """``GET .../sensitivity`` (and the SDK's ``sensitivity``): 404 before the first model, 422
    for an unknown method or a level outside (0, 1); then the model's indices, as
    :func:`worker.sensitivity.sensitivity` computes them on the stored model, each mean inside
    its interval, a total index at least its first-order one. f depends on x2 as 0.5 x2^2 and
    on x1 as a sine of amplitude 20: both matter, and no interaction exists."""
    from redis import Redis

    from fbgp_al.service.store import CampaignStore
    from fbgp_al.worker.sensitivity import sensitivity

    with FbgpClient(guarded, ADMIN) as api:
        campaign = api.create_campaign(dict(BODY, name="sensitivity")).id
        with pytest.raises(ApiError) as before:
            api.sensitivity(campaign)
        assert before.value.status_code == 404
        _label(api, campaign, 6)
        api.wait_for_model(campaign, 6, timeout=120)
        for params in ({"method": "exact"}, {"level": 1.0}, {"level": 0}):
            r = httpx.get(
                f"{guarded}/campaigns/{campaign}/sensitivity",
                params=params,
                headers={"Authorization": f"Bearer {ADMIN}"},
            )
            assert r.status_code == 422, (params, r.text)
        answer = api.sensitivity(campaign, level=0.9)
    store = CampaignStore(Redis.from_url(redis_url))
    spec, model, labels = (
        store.campaigns.spec(campaign),
        store.models.latest(campaign),
        store.labels.all(campaign),
    )
    expected = sensitivity(spec, model, labels, level=0.9)
    assert answer["model_version"] == 6 and answer["inputs"] == ["x1", "x2"]
    for kind in ("first", "total"):
        np.testing.assert_allclose(answer[kind]["mean"], expected[kind]["mean"], rtol=1e-12)
        band = answer[kind]
        assert all(
            lo <= m <= hi for lo, m, hi in zip(band["low"], band["mean"], band["high"], strict=True)
        )
    assert all(
        t >= f - 1e-9 for f, t in zip(answer["first"]["mean"], answer["total"]["mean"], strict=True)
    )
    assert 0.0 < sum(answer["first"]["mean"]) <= 1.0 + 1e-9
    assert answer["level"] == 0.9 and answer["method"] == "closed-form"
    assert answer["draws"] == len(model["acquisition_samples"]["noise"])
