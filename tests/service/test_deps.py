"""Scoped access (:mod:`service.deps`) on a real API with ``FBGP_API_TOKEN`` set: a campaign's
simulator token opens its labeling loop and status only, its owner token everything of it, and
each opens its own campaign only; a token goes with its campaign; the SDK and the simulator
commands need only the simulator token; a body without a valid token is refused before it is
read; and tokens never reach the log."""

import re
import socket
import sys

import httpx
import pytest
from redis import Redis

from fbgp_al.clients.client import ApiError, FbgpClient
from fbgp_al.clients.ops import run, simulate
from fbgp_al.clients.runner import run_simulator
from fbgp_al.service.settings import Settings, get_settings
from tests.conftest import start_api, stop
from tests.service.conftest import guarded_body as _body

ADMIN = "service-token-for-the-access-tests"
# what a simulator token opens: method and path under /campaigns/{campaign_id}
SIMULATOR_CALLS = {
    ("GET", ""),
    ("GET", "/next"),
    ("POST", "/label"),
    ("POST", "/fail"),
    ("POST", "/abandon"),
    ("POST", "/renew"),
}


@pytest.fixture(scope="module")
def guarded(redis_url, worker_process, tmp_path_factory):
    """An API with a service token, on the tests' Redis and worker; its log file."""
    log = tmp_path_factory.mktemp("access") / "api.log"
    process, url = start_api(redis_url, log, api_token=ADMIN, max_wait_seconds=2)
    yield url, log
    stop(process)


def _as(url: str, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, timeout=60, headers=headers)


def _create(url: str, make_body, **changes) -> dict:
    with _as(url, ADMIN) as api:
        r = api.post("/campaigns", json=make_body(**changes))
    assert r.status_code == 201, r.text
    assert r.headers["Cache-Control"] == "no-store"  # it carries the tokens
    return r.json()


def _campaign_calls(url: str) -> list[tuple[str, str]]:
    """Every method and path under ``/campaigns/{campaign_id}`` that the service serves, from
    its OpenAPI document (a route added later is among them), and the pages' plots."""
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    calls = []
    for path, methods in paths.items():
        if path.startswith("/campaigns/{campaign_id}"):
            rest = path.removeprefix("/campaigns/{campaign_id}").replace("{kind}", "model")
            calls += [(method.upper(), rest) for method in methods]
    return calls


def test_the_simulator_token_opens_the_loop_and_the_status_only(guarded, make_body):
    url, _ = guarded
    a = _create(url, make_body, name="a")
    b = _create(url, make_body, name="b")
    assert len({a["token"], a["owner_token"], b["token"], b["owner_token"]}) == 4
    calls = _campaign_calls(url)
    assert set(calls) > SIMULATOR_CALLS and ("DELETE", "") in calls and len(calls) > 12
    with _as(url, a["token"]) as sim:
        assert sim.get(f"/campaigns/{a['id']}").json()["n_labeled"] == 0
        tickets = [sim.get(f"/campaigns/{a['id']}/next").json()["ticket"] for _ in range(3)]
        assert (
            sim.post(f"/campaigns/{a['id']}/renew", json={"ticket": tickets[0]}).status_code == 200
        )
        label = sim.post(f"/campaigns/{a['id']}/label", json={"ticket": tickets[0], "y": 0.5})
        assert label.status_code == 201
        failed = sim.post(f"/campaigns/{a['id']}/fail", json={"ticket": tickets[1], "reason": "x"})
        assert failed.status_code == 201
        assert (
            sim.post(f"/campaigns/{a['id']}/abandon", json={"ticket": tickets[2]}).status_code
            == 201
        )
        for method, rest in calls:
            if (method, rest) in SIMULATOR_CALLS:
                continue
            body = {} if method in ("POST", "PUT", "PATCH") else None
            r = sim.request(method, f"/campaigns/{a['id']}{rest}", json=body)
            assert r.status_code == 403, (method, rest, r.text)
            assert "owner token" in r.json()["detail"] and "/next" in r.json()["detail"]
        r = sim.get(f"/campaigns/{b['id']}/next")  # another campaign's loop: not its own
        assert r.status_code == 403 and a["id"] in r.json()["detail"]
    with _as(url, a["owner_token"]) as owner:
        assert owner.get(f"/campaigns/{b['id']}/observations").status_code == 403
        for method, rest in calls:
            if method == "DELETE":
                continue
            body = {} if method in ("POST", "PUT", "PATCH") else None
            r = owner.request(method, f"/campaigns/{a['id']}{rest}", json=body)
            assert r.status_code not in (401, 403), (method, rest, r.text)
        imported = owner.post(
            f"/campaigns/{a['id']}/observations", json={"x": [[1.0]], "y": [0.25]}
        )
        assert imported.status_code == 201 and imported.json()["n_labeled"] == 2
        csv = owner.get(f"/campaigns/{a['id']}/observations", headers={"Accept": "text/csv"})
        assert csv.status_code == 200 and csv.text.count("\n") == 4  # header, 2 labels, 1 failure
        assert owner.delete(f"/campaigns/{a['id']}").status_code == 204
    for token in (a["token"], a["owner_token"]):  # both gone with their campaign
        with _as(url, token) as gone:
            assert gone.get(f"/campaigns/{a['id']}").status_code == 401


def test_delete_leaves_no_token_behind(guarded, redis_url, make_body):
    url, _ = guarded
    campaign = _create(url, make_body, name="deleted")
    redis = Redis.from_url(redis_url)
    grants = [v.decode() for v in redis.hvals("fbgp:tokens")]
    assert campaign["id"] in grants and f"{campaign['id']} owner" in grants
    with _as(url, campaign["owner_token"]) as owner:
        assert owner.delete(f"/campaigns/{campaign['id']}").status_code == 204
    assert not [v for v in redis.hvals("fbgp:tokens") if campaign["id"].encode() in v]


def test_the_sdk_and_the_simulator_commands_need_only_the_simulator_token(guarded, make_body):
    """The SDK hands out both tokens; its runner, ``fbgp-al run`` and ``fbgp-al simulate``
    label with the simulator token alone, which cannot delete the campaign."""
    url, _ = guarded
    with FbgpClient(url, ADMIN) as api:
        campaign = api.create_campaign(make_body(name="sdk", max_labels=6))
    assert campaign.token and campaign.owner_token and campaign.owner_token != campaign.token
    assert "owner_token" not in campaign.spec and campaign.owner_token not in repr(campaign)
    posted = run_simulator(
        url, campaign.id, lambda x: x[0] ** 2, token=campaign.token, wait=1, max_labels=1
    )
    command = [sys.executable, "-c", "import sys; print(float(sys.argv[1]) ** 2)", "{x}"]
    status = run.run(url, campaign.id, command, token=campaign.token, wait=1, max_labels=1)
    labeled = simulate.main(
        [
            "gramacy1d",
            "--url",
            url,
            "--campaign",
            campaign.id,
            "--token",
            campaign.token,
            "--max-labels",
            "1",
            "--quiet",
        ]
    )
    assert (posted, status, labeled) == (1, 0, 1)
    with FbgpClient(url, campaign.token) as sim:
        assert sim.campaign(campaign.id).n_labeled == 3
        with pytest.raises(ApiError) as error:
            sim.delete_campaign(campaign.id)
        assert error.value.status_code == 403 and "owner token" in error.value.detail
    with FbgpClient(url, campaign.owner_token) as owner:
        assert len(owner.observations(campaign.id).y) == 3
        owner.delete_campaign(campaign.id)


def _announce(url: str, path: str, authorization: str | None) -> str:
    """What the API answers a POST to ``path`` that announces a 15 MB body and sends 12 bytes
    of it (the whole answer; the socket gives up after 5 s of silence)."""
    host, port = url.removeprefix("http://").split(":")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/json\r\nContent-Length: 15000000\r\n"
    )
    if authorization:
        head += f"Authorization: {authorization}\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((head + "\r\n").encode() + b'{"ticket": "')  # and no more of the body
        sock.settimeout(5)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
            re.search(rb"(?i)content-length: (\d+)", answer)[1]
        ):
            answer += sock.recv(65536)
        return answer.decode("latin-1")


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic YWxpY2U6"])
def test_a_body_without_a_valid_token_is_refused_before_it_is_read(guarded, authorization):
    """A request that announces a 15 MB body with no token of this service is answered 401 at
    once, its body never read nor parsed (before, the API read and parsed it, then said 401:
    anyone could keep it parsing)."""
    url, _ = guarded
    answer = _announce(url, "/campaigns/abc/label", authorization)
    assert answer.startswith("HTTP/1.1 401"), answer
    assert "WWW-Authenticate: Bearer" in answer or "www-authenticate: Bearer" in answer


def test_a_body_the_token_does_not_open_is_refused_before_it_is_read(guarded, make_body):
    """A valid token on a call it does not open is answered 403 before the body is read: a
    simulator creating a campaign or importing labels, a campaign's token on another campaign,
    a team's on the teams' routes. Before, the API read and parsed the whole body first (1.6 s
    for a million-point pool). The calls it opens still take their body."""
    url, _ = guarded
    a = _create(url, make_body, name="scoped-a")
    b = _create(url, make_body, name="scoped-b")
    with _as(url, ADMIN) as api:
        team = api.post("/teams", json={"name": "scoped-team"})
    assert team.status_code == 201, team.text
    refused = [
        (a["token"], "/campaigns", "does not open this call"),
        (a["token"], f"/campaigns/{a['id']}/observations", "owner token"),
        (a["owner_token"], f"/campaigns/{b['id']}/label", a["id"]),
        (team.json()["token"], "/teams", "service token"),
        (team.json()["token"], f"/campaigns/{a['id']}/label", "did not create it"),
    ]
    for token, path, said in refused:
        answer = _announce(url, path, f"Bearer {token}")
        assert answer.startswith("HTTP/1.1 403"), (path, answer)
        assert said in answer, (path, answer)
    # the same route's own token waits for its body (no answer in 5 s), then takes it
    with pytest.raises(TimeoutError):
        _announce(url, f"/campaigns/{a['id']}/label", f"Bearer {a['token']}")
    with _as(url, a["token"]) as sim:
        ticket = sim.get(f"/campaigns/{a['id']}/next").json()["ticket"]
        label = sim.post(f"/campaigns/{a['id']}/label", json={"ticket": ticket, "y": 0.5})
    assert label.status_code == 201, label.text


def _admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {ADMIN}"})


def test_a_campaign_token_opens_its_campaign_only(guarded):
    url, log = guarded
    with _admin(url) as api:
        a = api.post("/campaigns", json=_body(name="a")).json()
        b = api.post("/campaigns", json=_body(name="b")).json()
    token_a = a["token"]
    assert token_a and token_a != b["token"] and token_a not in str(a["status"])
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {token_a}"}
    ) as sim:
        point = sim.get(f"/campaigns/{a['id']}/next")
        assert point.status_code == 200
        label = {"ticket": point.json()["ticket"], "y": 1.0}
        assert sim.post(f"/campaigns/{a['id']}/label", json=label).status_code == 201
        assert sim.get(f"/campaigns/{a['id']}").json()["n_labeled"] == 1
        for r in (
            sim.get(f"/campaigns/{b['id']}"),
            sim.get(f"/campaigns/{b['id']}/next"),
            sim.post(f"/campaigns/{b['id']}/label", json=label),
            sim.get(f"/campaigns/{b['id']}/observations"),
            sim.get("/campaigns"),
            sim.post("/campaigns", json=_body()),
            sim.get("/campaigns/unknown"),
        ):
            assert r.status_code == 403, (r.request.url, r.text)
            assert a["id"] in r.json()["detail"]
        assert sim.get(f"/campaigns/{a['id']}/view").status_code == 403  # its owner's page
    with httpx.Client(base_url=url, timeout=30) as anyone:
        wrong = {"Authorization": "Bearer not-a-token"}
        assert anyone.get(f"/campaigns/{a['id']}", headers=wrong).status_code == 401
        assert anyone.get(f"/campaigns/{a['id']}").status_code == 401
    with _admin(url) as api:
        assert api.delete(f"/campaigns/{a['id']}").status_code == 204
    with httpx.Client(
        base_url=url, timeout=30, headers={"Authorization": f"Bearer {token_a}"}
    ) as sim:
        assert sim.get(f"/campaigns/{a['id']}").status_code == 401  # gone with its campaign
    text = log.read_text()
    assert ADMIN not in text and token_a not in text and b["token"] not in text
    assert a["owner_token"] not in text and b["owner_token"] not in text
    assert "/label" in text  # the log has the requests, not the secrets


def test_token_is_required_when_configured(client, settings, make_body):
    from fbgp_al.service.app import app

    app.dependency_overrides[get_settings] = lambda: Settings(
        redis_url=settings.redis_url, api_token="s3cret"
    )
    assert client.get("/campaigns").status_code == 401
    assert client.get("/campaigns", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/campaigns", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/healthz").status_code == 200  # liveness needs no token
