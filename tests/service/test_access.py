"""Scoped access on a real API with ``FBGP_API_TOKEN`` set: a campaign's simulator token opens
its labeling loop and status only, its owner token everything of it; ``?token=`` is taken on
the pages only, which keep it as an HttpOnly cookie and never in a link; the pages send
security headers and run no script."""

import json
import re
import shutil
import socket
import subprocess
import sys
import time

import httpx
import pytest
from redis import Redis

from clients.client import ApiError, FbgpClient
from clients.ops import run, simulate
from clients.runner import run_simulator
from tests.conftest import start_api, stop
from tests.service.conftest import label_design, wait_for_model

ADMIN = "service-token-for-the-access-tests"
# what a simulator token opens: method and path under /campaigns/{campaign_id}
SIMULATOR_CALLS = {("GET", ""), ("GET", "/next"), ("POST", "/label"), ("POST", "/fail"),
                   ("POST", "/abandon"), ("POST", "/renew")}  # fmt: skip


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
        assert sim.post(f"/campaigns/{a['id']}/abandon",
                        json={"ticket": tickets[2]}).status_code == 201  # fmt: skip
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
        imported = owner.post(f"/campaigns/{a['id']}/observations",
                              json={"x": [[1.0]], "y": [0.25]})  # fmt: skip
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


def test_a_query_token_is_taken_on_the_pages_only_and_kept_as_a_cookie(guarded, make_body):
    url, log = guarded
    campaign = _create(url, make_body, name="cookie")
    owner, sim = campaign["owner_token"], campaign["token"]
    view = f"/campaigns/{campaign['id']}/view"
    with httpx.Client(base_url=url, timeout=60) as browser:
        r = browser.get(f"/campaigns/{campaign['id']}/observations", params={"token": owner})
        assert r.status_code == 401 and "pages only" in r.json()["detail"]
        assert browser.get(f"/campaigns/{campaign['id']}", params={"token": sim}).status_code == 401
        assert browser.get(view).status_code == 401
        bad = browser.get(view, params={"token": "not-a-token"})
        assert bad.status_code == 401 and "set-cookie" not in bad.headers
        assert browser.get(view, params={"token": sim}).status_code == 403  # the owner's page
        assert not browser.cookies

        r = browser.get(view, params={"token": owner, "x": "1"})
        assert r.status_code == 303 and r.headers["Location"] == f"{view}?x=1"
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"fbgp_token={owner};") and "HttpOnly" in cookie
        assert "SameSite=strict" in cookie and "Path=/" in cookie
        assert r.headers["Cache-Control"] == "no-store"
        page = browser.get(view)  # the cookie, from here on
        assert page.status_code == 200 and "cookie" in page.text and owner not in page.text
        assert browser.get(f"/campaigns/{campaign['id']}/plots/model.png").status_code == 404
        # the cookie opens the pages, not the API
        assert browser.get(f"/campaigns/{campaign['id']}/observations").status_code == 401
        assert browser.get("/").status_code == 403  # the index is the service's

    with httpx.Client(base_url=url, timeout=60) as browser:
        r = browser.get("/", params={"cursor": campaign["id"], "token": ADMIN})
        assert r.status_code == 303 and r.headers["Location"] == f"/?cursor={campaign['id']}"
        index = browser.get("/")
        assert index.status_code == 200 and f"{view}'" in index.text
        assert "token" not in index.text and ADMIN not in index.text
    text = log.read_text()
    assert owner not in text and ADMIN not in text and sim not in text


def test_the_pages_send_security_headers_and_run_no_script(guarded, make_body):
    url, _ = guarded
    campaign = _create(url, make_body, name="headers")
    with _as(url, ADMIN) as api:
        for path in ("/", f"/campaigns/{campaign['id']}/view"):
            r = api.get(path)
            assert r.status_code == 200
            policy = r.headers["Content-Security-Policy"]
            assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
            assert "script-src" not in policy and "unsafe" not in policy
            assert r.headers["X-Content-Type-Options"] == "nosniff"
            assert r.headers["Referrer-Policy"] == "no-referrer"
            assert r.headers["X-Frame-Options"] == "DENY"
            assert r.headers["Cache-Control"] == "no-store"
            assert "<script" not in r.text and not re.search(r"\son\w+=", r.text)


def test_a_browser_opens_a_campaign_page_with_its_owner_token(guarded, make_body, tmp_path):
    """Headless Chromium opens the page once with ``?token=``: it is sent on to the page without
    it, and fetches the plots with the cookie (the API's log shows each answered 200)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing (make test installs Debian's chromium)"
    url, log = guarded
    campaign = _create(url, make_body, name="browser", max_labels=4)
    with _as(url, campaign["owner_token"]) as owner:
        label_design(owner, campaign["id"], (0.1, 0.9, -0.4))
        t = owner.get(f"/campaigns/{campaign['id']}/next", params={"wait": 30}).json()["ticket"]
        owner.post(f"/campaigns/{campaign['id']}/label", json={"ticket": t, "y": 0.3})
        wait_for_model(owner, campaign["id"], 4)
    seen = len(log.read_text().splitlines())
    page = f"{url}/campaigns/{campaign['id']}/view?token={campaign['owner_token']}"
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page]  # fmt: skip
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "browser" in dom.stdout and 'id="plot-posterior"' in dom.stdout, dom.stderr[-2000:]
    browser = ("/campaigns/{campaign_id}/view", "/campaigns/{campaign_id}/plots/{kind}.png")

    def fetched():
        # the API writes a request's log line after its answer is sent: the lines of the last
        # requests before the browser's (and the browser's last ones) may come a moment late
        lines = [
            json.loads(line) for line in log.read_text().splitlines()[seen:] if line.startswith("{")
        ]
        return [
            (e["route"], e["status"])
            for e in lines
            if e.get("campaign") == campaign["id"] and e["route"] in browser
        ]

    deadline = time.monotonic() + 10
    while len(mine := fetched()) < 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert mine[:2] == [
        ("/campaigns/{campaign_id}/view", 303),
        ("/campaigns/{campaign_id}/view", 200),
    ]
    plots = [s for route, s in mine if route.endswith("/plots/{kind}.png")]
    # the model, the posterior and the accuracy estimates, fetched with the cookie
    assert plots == [200, 200, 200], mine


def test_the_sdk_and_the_simulator_commands_need_only_the_simulator_token(guarded, make_body):
    """The SDK hands out both tokens; its runner, ``fbgp-al run`` and ``fbgp-al simulate``
    label with the simulator token alone, which cannot delete the campaign."""
    url, _ = guarded
    with FbgpClient(url, ADMIN) as api:
        campaign = api.create_campaign(make_body(name="sdk", max_labels=6))
    assert campaign.token and campaign.owner_token and campaign.owner_token != campaign.token
    assert "owner_token" not in campaign.spec and campaign.owner_token not in repr(campaign)
    posted = run_simulator(url, campaign.id, lambda x: x[0] ** 2, token=campaign.token,
                           wait=1, max_labels=1)  # fmt: skip
    command = [sys.executable, "-c", "import sys; print(float(sys.argv[1]) ** 2)", "{x}"]
    status = run.run(url, campaign.id, command, token=campaign.token, wait=1, max_labels=1)
    labeled = simulate.main(["gramacy1d", "--url", url, "--campaign", campaign.id, "--token",
                             campaign.token, "--max-labels", "1", "--quiet"])  # fmt: skip
    assert (posted, status, labeled) == (1, 0, 1)
    with FbgpClient(url, campaign.token) as sim:
        assert sim.campaign(campaign.id).n_labeled == 3
        with pytest.raises(ApiError) as error:
            sim.delete_campaign(campaign.id)
        assert error.value.status_code == 403 and "owner token" in error.value.detail
    with FbgpClient(url, campaign.owner_token) as owner:
        assert len(owner.observations(campaign.id).y) == 3
        owner.delete_campaign(campaign.id)


def test_a_token_never_starts_like_a_command_line_option():
    """``fbgp-al simulate --token <token>`` and ``fbgp-al run --token <token>``: argparse takes a
    value that starts with "-" for an option (one token in 64 did, at random)."""
    from service.tokens import PREFIX, new_token

    tokens = [new_token() for _ in range(2000)]
    assert all(t.startswith(PREFIX) and len(t) > 40 for t in tokens)
    assert len(set(tokens)) == len(tokens)


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic YWxpY2U6"])
def test_a_body_without_a_valid_token_is_refused_before_it_is_read(guarded, authorization):
    """A request that announces a 15 MB body with no token of this service is answered 401 at
    once, its body never read nor parsed (before, the API read and parsed it, then said 401:
    anyone could keep it parsing)."""
    url, _ = guarded
    host, port = url.removeprefix("http://").split(":")
    head = (f"POST /campaigns/abc/label HTTP/1.1\r\nHost: {host}\r\n"
            "Content-Type: application/json\r\nContent-Length: 15000000\r\n")  # fmt: skip
    if authorization:
        head += f"Authorization: {authorization}\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall((head + "\r\n").encode() + b'{"ticket": "')  # and no more of the body
        sock.settimeout(5)
        answer = sock.recv(65536).decode("latin-1")
    assert answer.startswith("HTTP/1.1 401"), answer
    assert "WWW-Authenticate: Bearer" in answer or "www-authenticate: Bearer" in answer
