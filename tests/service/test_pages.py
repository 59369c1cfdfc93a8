"""The campaign pages, over HTTP and in a real headless Chromium; with ``FBGP_API_TOKEN`` set,
``?token=`` is taken on the pages only, which keep it as an HttpOnly cookie and never in a link,
send security headers and run no script."""

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import start_api, stop
from tests.service.conftest import label_design, wait_for_model
from tests.service.test_deps import ADMIN, _as, _create

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "results" / "test-artifacts"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _with_model(client, make_body, **changes) -> str:
    changes.setdefault("max_labels", 8)
    campaign = client.post("/campaigns", json=make_body(**changes)).json()["id"]
    label_design(client, campaign, (0.1, 0.9, -0.4))
    t = client.get(f"/campaigns/{campaign}/next", params={"wait": 30}).json()["ticket"]
    client.post(f"/campaigns/{campaign}/label", json={"ticket": t, "y": 0.3})
    wait_for_model(client, campaign, 4)
    return campaign


def test_pages_over_http(client, make_body):
    campaign = client.post("/campaigns", json=make_body(name="<b>odd & name</b>")).json()["id"]
    index = client.get("/")
    assert index.status_code == 200 and "&lt;b&gt;odd &amp; name&lt;/b&gt;" in index.text
    assert f"/campaigns/{campaign}/view" in index.text and "<b>odd" not in index.text
    view = client.get(f"/campaigns/{campaign}/view").text
    assert "No model yet" in view and 'http-equiv="refresh"' in view
    assert client.get(f"/campaigns/{campaign}/plots/model.png").status_code == 404
    # an input's name that matplotlib would parse as TeX it does not know is drawn as it is
    tex = [{"name": r"$\frac{x$ (m$^2$)", "lower": 0.5, "upper": 2.5}]
    campaign = _with_model(client, make_body, inputs=tex)
    view = client.get(f"/campaigns/{campaign}/view").text
    assert "plot-model" in view and "plot-posterior" in view and "plot-curve" not in view
    assert "plot-accuracy" in view and "loo-rmse" in view
    for kind in ("model", "posterior", "accuracy"):
        png = client.get(f"/campaigns/{campaign}/plots/{kind}.png")
        assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
        assert png.headers["X-Content-Type-Options"] == "nosniff"
        assert png.headers["Cache-Control"] == "no-store"
    assert client.get(f"/campaigns/{campaign}/plots/curve.png").status_code == 404
    assert client.get(f"/campaigns/{campaign}/plots/other.png").status_code == 404
    client.post(f"/campaigns/{campaign}/evaluate", json={"x": [[1.0], [2.0]], "y": [0.2, 0.4]})
    assert "plot-curve" in client.get(f"/campaigns/{campaign}/view").text
    assert client.get(f"/campaigns/{campaign}/plots/curve.png").content.startswith(b"\x89PNG")
    assert client.get("/campaigns/nope/view").status_code == 404


def test_campaign_page_renders_its_plots_in_headless_chromium(
    redis_url, worker_process, make_body, tmp_path
):
    """The page and its four plots load in a real browser, under the pages' security headers:
    the API's log shows each plot fetched and answered 200."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing (make test installs Debian's chromium)"
    log = tmp_path / "api.log"
    process, api_url = start_api(redis_url, log)
    try:
        with httpx.Client(base_url=api_url, timeout=60) as client:
            # done: the page stops refreshing itself, so the browser's load finishes
            campaign = _with_model(client, make_body, name="page-test", max_labels=4)
            client.post(
                f"/campaigns/{campaign}/evaluate", json={"x": [[1.0], [2.0]], "y": [0.2, 0.4]}
            )
        seen = len(log.read_text().splitlines())
        url = f"{api_url}/campaigns/{campaign}/view"
        profile = ["--user-data-dir=" + str(tmp_path / "profile")]
        browser = [chromium, *CHROMIUM_FLAGS, *profile]
        dom = subprocess.run(
            [*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120
        )
        lines = log.read_text().splitlines()[seen:]
        assert "page-test" in dom.stdout, dom.stderr[-2000:]
        for kind in ("model", "posterior", "accuracy", "curve"):
            assert f'id="plot-{kind}"' in dom.stdout
        events = [json.loads(line) for line in lines if line.startswith("{")]
        plots = [
            e["status"]
            for e in events
            if e.get("route", "").endswith("/plots/{kind}.png") and e.get("campaign") == campaign
        ]
        assert plots == [200, 200, 200, 200], events
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "campaign-page.png"
        subprocess.run(
            [
                *browser,
                "--virtual-time-budget=10000",
                "--window-size=1100,1500",
                f"--screenshot={shot}",
                url,
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
        assert shot.stat().st_size > 20_000  # text and four plots, not a blank page
    finally:
        stop(process)


def test_a_picture_is_drawn_once_per_change_however_many_ask(
    client, make_body, settings, monkeypatch
):
    """Eight pages asking for one picture at once get one drawing (more than a campaign's
    plots may have out at once: none is 429), later pages get it kept, and a change of the
    campaign draws it anew; a deleted campaign keeps none."""
    from concurrent.futures import ThreadPoolExecutor

    from redis import Redis

    from fbgp_al.service import pages

    campaign = _with_model(client, make_body)
    drawn = []
    real = pages.run_job

    def counted(*args):
        drawn.append(args[3:])
        return real(*args)

    monkeypatch.setattr(pages, "run_job", counted)
    url = f"/campaigns/{campaign}/plots/posterior.png"
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: client.get(url), range(8)))
    assert [a.status_code for a in answers] == [200] * 8, [a.text for a in answers]
    assert len({a.content for a in answers}) == 1 and answers[0].content.startswith(b"\x89PNG")
    assert len(drawn) == 1
    assert client.get(url).content == answers[0].content and len(drawn) == 1
    # a change (an evaluation is an event of the history): drawn again, once
    client.post(f"/campaigns/{campaign}/evaluate", json={"x": [[1.0], [2.0]], "y": [0.2, 0.4]})
    assert client.get(url).status_code == 200 and client.get(url).status_code == 200
    assert len(drawn) == 2
    assert client.get(f"/campaigns/{campaign}/plots/model.png").status_code == 200
    assert len(drawn) == 3  # another picture is drawn for itself
    # an output the campaign lacks is 404 (a single-output campaign has none by name)
    r = client.get(url, params={"output": "stress"})
    assert r.status_code == 404 and "one output" in r.text
    redis = Redis.from_url(settings.redis_url)
    assert redis.hlen(f"fbgp:c:{campaign}:plots") == 2
    client.delete(f"/campaigns/{campaign}")
    assert not redis.exists(f"fbgp:c:{campaign}:plots")


@pytest.fixture(scope="module")
def guarded(redis_url, worker_process, tmp_path_factory):
    """An API with a service token, on the tests' Redis and worker; its log file."""
    log = tmp_path_factory.mktemp("access") / "api.log"
    process, url = start_api(redis_url, log, api_token=ADMIN, max_wait_seconds=2)
    yield url, log
    stop(process)


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
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--dump-dom",
        page,
    ]
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


def test_the_list_stops_refreshing_itself_once_every_campaign_is_done(client, make_body):
    """The list at ``/`` refreshes itself while any campaign runs (takes labels, or fits a
    model), and not once every one is done with its last model in; a done campaign's page keeps
    refreshing, and says so, while the model of its last labels is still fitting."""
    refresh = 'http-equiv="refresh"'
    assert refresh not in client.get("/").text  # no campaign: nothing to wait for
    campaign = client.post("/campaigns", json=make_body(max_labels=4)).json()["id"]
    assert refresh in client.get("/").text  # the design is being labeled
    label_design(client, campaign, (0.1, 0.9, -0.4))
    t = client.get(f"/campaigns/{campaign}/next", params={"wait": 30}).json()["ticket"]
    client.post(f"/campaigns/{campaign}/label", json={"ticket": t, "y": 0.3})
    status = client.get(f"/campaigns/{campaign}").json()
    if status["refit"] != "idle" and status["model_version"] != 4:  # the last model fitting
        view = client.get(f"/campaigns/{campaign}/view").text
        assert refresh in view and "id='final-model'" in view
    wait_for_model(client, campaign, 4)
    assert client.get(f"/campaigns/{campaign}").json()["state"] == "done"
    assert refresh not in client.get("/").text
    view = client.get(f"/campaigns/{campaign}/view").text
    assert refresh not in view and "final-model" not in view
    client.post("/campaigns", json=make_body())  # another one starts: the list refreshes again
    assert refresh in client.get("/").text
