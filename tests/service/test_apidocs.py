"""``/docs`` and ``/redoc`` work without the internet: their assets are served by the API
itself, and a real headless Chromium, with every host but loopback unresolvable, renders the
operations of the OpenAPI document."""

import shutil
import subprocess

import httpx

from tests.conftest import start_api, stop
from tests.service.test_pages import CHROMIUM_FLAGS

# no name resolves but loopback's: a page that needs a CDN renders nothing
OFFLINE = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]


def test_docs_pages_load_their_assets_from_the_service(client):
    for path in ("/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 200
        sources = [part.split('"')[0] for part in page.text.split('src="')[1:]]
        sources += [part.split('"')[0] for part in page.text.split('href="')[1:]]
        assert sources and all(s.startswith("/docs/assets/") for s in sources), sources
        for source in sources:
            asset = client.get(source)
            assert asset.status_code == 200 and len(asset.content) > 1000, source
    assert "/docs" not in client.get("/openapi.json").json()["paths"]


def test_docs_render_the_operations_offline_in_headless_chromium(redis_url, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is missing (make test installs Debian's chromium)"
    process, api_url = start_api(redis_url, tmp_path / "api.log")
    try:
        summary = httpx.get(f"{api_url}/openapi.json").json()["paths"][
            "/campaigns/{campaign_id}/next"
        ]["get"]["summary"]
        browser = [chromium, *CHROMIUM_FLAGS, *OFFLINE, f"--user-data-dir={tmp_path / 'p'}"]
        dom = subprocess.run(
            [*browser, "--virtual-time-budget=15000", "--dump-dom", f"{api_url}/docs"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "opblock-summary" in dom.stdout, dom.stderr[-2000:]  # Swagger UI ran
        assert "/campaigns/{campaign_id}/next" in dom.stdout
        assert summary in dom.stdout
    finally:
        stop(process)
