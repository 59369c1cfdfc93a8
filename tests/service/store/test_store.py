"""The campaign store (:class:`service.store.CampaignStore`) as written by the service at d84e063
and at 85c3182 (``tests/data/store_<commit>.json``, written by ``tests/data/write_store.py``: a
refit running when its worker was killed, a refit queued in RQ, tickets out, a failed and an
abandoned run, a team's campaign) is read by today's code, on a real redis-server with a real
API and a real worker, and its campaigns run to the end."""

from __future__ import annotations

import base64
import json
import math
import time
from pathlib import Path

import httpx
import pytest
from redis import Redis

from tests.conftest import start_api, start_redis, start_worker, stop

DATA = Path(__file__).resolve().parents[2] / "data"
WRITTEN_BY = ("d84e063", "85c3182")  # the commits whose stores are read


def f(x: list[float]) -> float:
    """The simulator the store was written with."""
    return math.sin(3 * x[0]) + 0.1 * x[0]


@pytest.fixture(scope="module", params=WRITTEN_BY)
def stored(request, tmp_path_factory):
    """The store of each commit restored into a redis-server of its own, with an API and a
    worker of today; the file's contents, and the API's URL."""
    data = json.loads((DATA / f"store_{request.param}.json").read_text())
    tmp = tmp_path_factory.mktemp("stored")
    redis_process, url = start_redis(tmp)
    redis = Redis.from_url(url)
    for entry in data["keys"]:
        redis.restore(
            base64.b64decode(entry["key"]),
            entry["pttl"],
            base64.b64decode(entry["dump"]),
            replace=True,
        )
    # however long ago the file was written, its tickets out are still kept (a late label is
    # taken), and its refit killed mid-run is found dead within seconds
    settings = {
        "expired_ticket_seconds": 10 * 365 * 86400,
        "refit_lease_seconds": 3,
        "heartbeat_seconds": 0.5,
    }
    api, api_url = start_api(url, tmp / "api.log", api_token=data["admin_token"], **settings)
    worker = start_worker(url, tmp / "worker.log", **settings, maintenance_interval=2)
    yield data, api_url
    stop(worker)
    stop(api)
    stop(redis_process)


def _as(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_the_campaigns_teams_and_runs_read_as_they_were_written(stored):
    data, url = stored
    campaigns = data["campaigns"]
    with httpx.Client(base_url=url, headers=_as(data["admin_token"]), timeout=30) as api:
        listed = {c["name"]: c for c in api.get("/campaigns").json()}
        assert set(listed) == set(campaigns)
        assert {n: c["n_labeled"] for n, c in listed.items()} == {
            "running": 3,
            "queued": 3,
            "tickets": 1,
            "team": 1,
        }
        runs = listed["tickets"]
        assert (runs["n_failed"], runs["n_abandoned"]) == (1, 1)
        (team,) = api.get("/teams").json()
        assert (team["name"], team["live"], team["n_campaigns"]) == ("lab", True, 1)
        events = api.get(f"/campaigns/{campaigns['tickets']['id']}/history").json()
        assert [e["event"] for e in events] == ["run_failed", "run_abandoned"]
    with httpx.Client(base_url=url, headers=_as(data["team_token"]), timeout=30) as api:
        assert [c["name"] for c in api.get("/campaigns").json()] == ["team"]


def test_its_campaigns_run_to_the_end(stored):
    data, url = stored
    campaigns = data["campaigns"]
    deadline = time.monotonic() + 240
    done: dict[str, dict] = {}
    with httpx.Client(base_url=url, timeout=30) as api:
        for c in campaigns.values():  # the tickets left out are labeled (late, if expired)
            if "out" in c:
                label = {"ticket": c["out"]["ticket"], "y": f(c["out"]["x"])}
                answer = api.post(
                    f"/campaigns/{c['id']}/label", json=label, headers=_as(c["token"])
                )
                assert answer.status_code == 201, answer.text
        while len(done) < len(campaigns):
            assert time.monotonic() < deadline, f"not done in time: {set(campaigns) - set(done)}"
            for name, c in campaigns.items():
                if name in done:
                    continue
                headers = _as(c["token"])
                r = api.get(f"/campaigns/{c['id']}/next", params={"wait": 0.5}, headers=headers)
                if r.status_code == 200:
                    point = r.json()
                    label = {"ticket": point["ticket"], "y": f(point["x"])}
                    answer = api.post(f"/campaigns/{c['id']}/label", json=label, headers=headers)
                    assert answer.status_code == 201, answer.text
                status = api.get(f"/campaigns/{c['id']}", headers=headers).json()
                if status["state"] == "done":
                    done[name] = status
    for name, status in done.items():
        assert status["n_labeled"] == 5, name
        assert status["model_version"] is not None, name
        assert status["refit_failures"] <= 1, name  # the refit killed when it was written, at most


def test_its_campaigns_model_their_outputs_as_they_are(stored):
    """Specs written before output transforms (no ``transform``) model y as it is: their labels
    (some negative) stand, their models have no ``y_transform`` and ``/predict`` answers as
    before, without a log output's quantiles."""
    data, url = stored
    c = data["campaigns"]["running"]
    with httpx.Client(base_url=url, headers=_as(c["owner_token"]), timeout=60) as api:
        model = api.get(f"/campaigns/{c['id']}/model").json()
        assert set(model["transform"]) == {"lower", "upper", "y_mean", "y_std"}
        assert min(api.get(f"/campaigns/{c['id']}/observations").json()["y"]) < 0
        p = api.post(f"/campaigns/{c['id']}/predict", json={"x": [[0.7], [1.9]]})
        assert p.status_code == 200, p.text
        assert set(p.json()) == {
            "mean",
            "variance",
            "mixture_mean",
            "mixture_variance",
            "model_version",
        }
