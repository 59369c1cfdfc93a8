"""The HTTP client and the remote-simulator runner over real HTTP: a real API server
(``api_url``), Redis and worker."""

import logging
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
from redis import Redis

from fbgp_al.clients.client import ApiError, FbgpClient, NextPoint, Pending
from fbgp_al.clients.ops.stack import free_port
from fbgp_al.clients.runner import run_simulator
from fbgp_al.clients.simulators import get_simulator
from tests.conftest import start_api, start_worker, stop

ROOT = Path(__file__).resolve().parents[2]
FAST = {"chains": 2, "warmup": 30, "samples": 20, "thinning": 2}


def _body(**changes) -> dict:
    sim = get_simulator("gramacy1d")
    body = {
        "name": "client-test",
        "inputs": sim.inputs(),
        "pool": sim.pool,
        "acquisition": "qb-mgp",
        "max_labels": 5,
        "mcmc": FAST,
        "seed": 1,
    }
    return dict(body, **changes)


@pytest.fixture
def api(api_url):
    with FbgpClient(api_url, token="") as client:
        yield client


def test_a_whole_campaign(api, api_url):
    assert api.healthz() == {"status": "ok"}
    assert api.readyz().ready and api.readyz().workers >= 1
    sim = get_simulator("gramacy1d")
    campaign = api.create_campaign(_body())
    assert campaign.spec["max_labels"] == 5 and campaign.status.state == "design"
    assert campaign.token and "token" not in campaign.spec
    assert campaign.owner_token and "owner_token" not in campaign.spec
    assert campaign.id in [c.id for c in api.list_campaigns()]

    rng = np.random.default_rng(0)
    seen = []

    def f(x):
        return float(sim.sample(np.array([x]), rng)[0])

    posted = run_simulator(
        api_url, campaign.id, f, token="", wait=10, on_label=lambda x, y, n: seen.append(n)
    )
    assert posted == 5 and seen == [1, 2, 3, 4, 5]
    assert run_simulator(api_url, campaign.id, f, token="") == 0  # done: nothing more to label

    status = api.wait_for_model(campaign.id, 5, timeout=60)
    assert status.state == "done" and status.n_labeled == 5 and status.last_error is None
    data = api.observations(campaign.id)
    assert len(data.x) == len(data.y) == 5 and len({x[0] for x in data.x}) == 5
    csv = api.observations_csv(campaign.id).splitlines()
    assert csv[0] == '"x1","y","status","reason"' and len(csv) == 6

    model = api.model(campaign.id)
    assert model.version == model.n_labeled == 5
    assert len(model.acquisition_samples["noise"]) == FAST["chains"] * FAST["samples"] // 2
    assert model.max_rhat > 0 and model.min_ess > 0 and model.divergences >= 0
    assert model.refit_seconds > 0

    grid = [[0.5], [1.5], [2.5]]
    prediction = api.predict(campaign.id, np.array(grid))
    assert len(prediction.mean) == 3 and min(prediction.variance) > 0
    assert prediction.model_version == 5
    values = api.acquisition(campaign.id, grid, "b-qbc")
    assert len(values) == 3 and min(values) >= 0
    x_test = np.linspace(0.5, 2.5, 50)[:, None]
    evaluation = api.evaluate(campaign.id, x_test, sim.mean(x_test))
    assert math.isfinite(evaluation.nlml) and evaluation.rmse > 0
    assert evaluation.model_version == 5

    api.delete_campaign(campaign.id)
    api.delete_campaign(campaign.id, missing_ok=True)
    with pytest.raises(ApiError) as error:
        api.campaign(campaign.id)
    assert error.value.status_code == 404 and campaign.id in error.value.detail


def test_errors_carry_status_and_detail(api):
    with pytest.raises(ApiError) as error:
        api.create_campaign(_body(max_labels=2))  # smaller than the initial design
    assert error.value.status_code == 422 and "max_labels" in error.value.detail

    campaign = api.create_campaign(_body(max_labels=4)).id
    with pytest.raises(ApiError) as error:
        api.model(campaign)
    assert error.value.status_code == 404 and "no model" in error.value.detail
    with pytest.raises(ApiError) as error:
        api.label(campaign, "no-such-ticket", 1.0)
    assert error.value.status_code == 404 and "no-such-ticket" in error.value.detail

    point = api.try_next(campaign)
    assert isinstance(point, NextPoint) and point.model_version is None
    assert api.label(campaign, point.ticket, 0.25).created
    again = api.label(campaign, point.ticket, 0.25)  # the same label again: stored once
    assert not again.created and again.n_labeled == 1
    with pytest.raises(ApiError) as error:
        api.label(campaign, point.ticket, 0.5)
    assert error.value.status_code == 409 and error.value.detail

    with pytest.raises(ApiError) as error:  # 1 + 4 labels would exceed max_labels = 4
        api.import_observations(campaign, [[1.0], [1.2], [1.4], [1.6]], [0.1, 0.2, 0.3, 0.4])
    assert error.value.status_code == 409 and "max_labels" in error.value.detail
    assert api.import_observations(campaign, np.array([[1.0], [1.2]]), [0.1, 0.2]) == 3
    api.delete_campaign(campaign)


def test_next_point_asks_again_after_202(api):
    campaign = api.create_campaign(_body(max_labels=4)).id
    design = [api.try_next(campaign) for _ in range(3)]  # the whole design is out
    pending = api.try_next(campaign)
    assert isinstance(pending, Pending) and pending.retry_after >= 1
    with pytest.raises(ApiError) as error:  # nothing can come before the design is labeled
        api.next_point(campaign, wait=0, timeout=0.5)
    assert error.value.status_code == 202

    waits = []

    def label_the_design(answer: Pending) -> None:
        # the first 202 is the design still out; once labeled, a refit must run before a point
        waits.append(answer)
        if len(waits) == 1:
            for k, point in enumerate(design):
                api.label(campaign, point.ticket, float(k))

    point = api.next_point(campaign, wait=0, timeout=60, on_wait=label_the_design)
    assert isinstance(point, NextPoint) and point.model_version == 3
    assert len(waits) >= 1
    api.label(campaign, point.ticket, 1.0)
    assert api.next_point(campaign, wait=0) is None  # 410: done
    api.delete_campaign(campaign)


def test_connection_errors_are_retried_and_the_token_is_sent(redis_url, caplog, monkeypatch):
    port = free_port()
    env = dict(os.environ, FBGP_REDIS_URL=redis_url, FBGP_API_TOKEN="sesame")
    server = subprocess.Popen(
        [sys.executable, "-m", "fbgp_al.clients.ops.cli", "api", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        caplog.set_level(logging.WARNING, logger="fbgp.client")
        monkeypatch.setenv("FBGP_API_TOKEN", "sesame")
        with FbgpClient(url, retries=40, backoff=0.1) as api:  # the server is still starting
            assert isinstance(api.list_campaigns(), list)
        assert any("retrying" in r.message for r in caplog.records)
        with FbgpClient(url, token="wrong") as api, pytest.raises(ApiError) as error:
            api.list_campaigns()
        assert error.value.status_code == 401 and "token" in error.value.detail
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_busy_service_answers_503_and_the_client_asks_again(api, redis_url, tmp_path, caplog):
    """A model call no worker takes within ``FBGP_JOB_WAIT_SECONDS`` is answered 503 with
    ``Retry-After``, and the client asks again until a worker answers, with the same result.
    The campaign is copied to a Redis database that no worker serves until one is started."""
    sim = get_simulator("gramacy1d")
    campaign = api.create_campaign(_body(max_labels=3)).id
    x = np.array([[0.6], [1.4], [2.3]])
    api.import_observations(campaign, x, sim.mean(x))
    api.wait_for_model(campaign, 3, timeout=120)
    x_test = np.linspace(0.5, 2.5, 20)[:, None]
    expected = api.evaluate(campaign, x_test, sim.mean(x_test))

    source = Redis.from_url(redis_url)
    for key in source.scan_iter(f"fbgp:c:{campaign}:*"):
        assert source.copy(key, key, destination_db=12, replace=True)
    idle_db = redis_url.rsplit("/", 1)[0] + "/12"
    server, url = start_api(idle_db, tmp_path / "api.log", job_wait_seconds=5)
    worker = None
    try:
        body = {"x": x_test.tolist(), "y": sim.mean(x_test).tolist()}
        r = httpx.post(f"{url}/campaigns/{campaign}/evaluate", json=body, timeout=30)
        assert r.status_code == 503 and "busy" in r.json()["detail"]
        assert int(r.headers["Retry-After"]) >= 1

        caplog.set_level(logging.WARNING, logger="fbgp.client")
        with FbgpClient(url, token="") as busy, ThreadPoolExecutor(1) as pool:
            answer = pool.submit(busy.evaluate, campaign, x_test, sim.mean(x_test))
            while not any("503" in record.message for record in caplog.records):
                assert not answer.done(), answer.result()
                time.sleep(0.05)
            worker = start_worker(idle_db, tmp_path / "worker.log")
            got = answer.result(timeout=120)
        assert got.model_version == expected.model_version == 3
        assert (got.nlml, got.rmse) == pytest.approx((expected.nlml, expected.rmse), rel=1e-9)
    finally:
        if worker is not None:
            stop(worker)
        stop(server)
        Redis.from_url(idle_db).flushdb()
        api.delete_campaign(campaign)


def test_campaigns_are_read_page_by_page(api):
    """``iter_campaigns`` follows the cursors to the last page and sees every campaign once,
    created before it started, in id order."""
    made = {api.create_campaign(_body()).id for _ in range(5)}
    first, cursor = api.campaigns_page(limit=2)
    assert len(first) == 2 and cursor == first[-1].id
    ids = [c.id for c in api.iter_campaigns(page=2)]
    assert ids == sorted(ids) and len(ids) == len(set(ids)) and made <= set(ids)
    assert ids == [c.id for c in api.list_campaigns()]
    for campaign_id in made:
        api.delete_campaign(campaign_id)


def test_typed_inputs_through_the_sdk(api, api_url):
    """Points with text pass through the client; ``run_simulator`` hands ``f`` the values
    themselves (a choice's string, an int input's integer); the model names its features."""
    inputs = [
        {"name": "solver", "type": "choice", "values": ["cg", "gmres"]},
        {"name": "mesh", "type": "int", "lower": 1, "upper": 8},
        {"name": "rate", "type": "log", "lower": 1e-4, "upper": 1.0},
    ]
    body = _body(
        inputs=inputs,
        pool={"type": "grid", "points_per_dim": 10},
        max_labels=4,
        initial_design={"size": 3},
    )
    campaign = api.create_campaign(body)
    seen = []

    def f(x):
        solver, mesh, rate = x
        assert solver in ("cg", "gmres") and type(mesh) is int and 1e-4 <= rate <= 1.0
        seen.append(x)
        return (solver == "cg") + 0.1 * mesh + math.log10(rate)

    assert run_simulator(api_url, campaign.id, f, token="", wait=10) == 4
    assert api.observations(campaign.id).x == seen
    model = api.model(api.wait_for_model(campaign.id, 4, timeout=60).id)
    assert model.features == ["solver=cg", "solver=gmres", "mesh", "rate"]
    prediction = api.predict(campaign.id, [["gmres", 3, 0.01], [np.str_("cg"), 3.0, 0.01]])
    assert len(prediction.mean) == 2 and prediction.mean[0] != prediction.mean[1]
