"""Teams (:mod:`service.routes.teams`) on one shared stack, on a real API with ``FBGP_API_TOKEN``
set: a team's token creates campaigns, lists its own and opens those, and gets 403 on every call
of another team's campaign and on the service token's calls; a rotation or a delete ends the old
token at once; a team holds at most ``limit_team_campaigns`` campaigns, however many requests
race; ``fbgp-al team`` makes, lists and deletes teams."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from fbgp_al.clients.ops.stack import fbgp_env
from tests.conftest import ROOT, start_api, stop
from tests.service.test_deps import _as, _campaign_calls

ADMIN = "service-token-for-the-team-tests"
LIMIT = 3  # limit_team_campaigns of the tests' API


@pytest.fixture(scope="module")
def shared(redis_url, worker_process, tmp_path_factory):
    """An API with a service token and a small per-team campaign limit."""
    log = tmp_path_factory.mktemp("teams") / "api.log"
    process, url = start_api(redis_url, log, api_token=ADMIN, limit_team_campaigns=LIMIT)
    yield url
    stop(process)


def _team(url: str, name: str) -> str:
    with _as(url, ADMIN) as admin:
        r = admin.post("/teams", json={"name": name})
    assert r.status_code == 201, r.text
    assert r.headers["Cache-Control"] == "no-store"
    return r.json()["token"]


def _create(url: str, token: str, make_body, name: str = "c") -> dict:
    with _as(url, token) as api:
        r = api.post("/campaigns", json=make_body(name=name))
    assert r.status_code == 201, r.text
    return r.json()


def _listed(url: str, token: str, **params) -> set[str]:
    with _as(url, token) as api:
        r = api.get("/campaigns", params=params)
    assert r.status_code == 200, r.text
    return {c["id"] for c in r.json()}


def test_a_team_opens_its_own_campaigns_and_nothing_of_another_teams(shared, make_body):
    url = shared
    a, b = _team(url, "alpha"), _team(url, "beta")
    mine = _create(url, a, make_body, "alpha-1")
    with _as(url, mine["owner_token"]) as owner:  # its own tokens open it as before
        assert owner.get(f"/campaigns/{mine['id']}").json()["team"] == "alpha"
    with _as(url, a) as own:
        assert own.get(f"/campaigns/{mine['id']}/next").status_code == 200  # the loop runs
    with _as(url, ADMIN) as admin:
        assert {t["name"]: t["n_campaigns"] for t in admin.get("/teams").json()}["alpha"] == 1
    theirs = _create(url, b, make_body, "beta-1")
    admins = _create(url, ADMIN, make_body, "admin-1")
    assert (mine["team"], theirs["team"], admins["team"]) == ("alpha", "beta", None)
    assert mine["status"]["team"] == "alpha"

    assert _listed(url, a) == {mine["id"]}
    assert _listed(url, b) == {theirs["id"]}
    assert {mine["id"], theirs["id"], admins["id"]} <= _listed(url, ADMIN)
    with _as(url, a) as api:  # a page of one, and no cursor leads out of the team
        page = api.get("/campaigns", params={"limit": 1})
        assert [c["id"] for c in page.json()] == [mine["id"]]
        assert "X-Next-Cursor" not in page.headers
        index = api.get("/")
        assert index.status_code == 200 and mine["id"] in index.text
        assert theirs["id"] not in index.text and admins["id"] not in index.text

    calls = sorted(_campaign_calls(url), key=lambda call: call == ("DELETE", ""))  # it last
    assert calls[-1] == ("DELETE", "") and len(calls) > 12
    with _as(url, a) as own, _as(url, b) as other:
        for method, rest in calls:
            path = f"/campaigns/{mine['id']}{rest}"
            refused = other.request(method, path, json={})
            assert refused.status_code == 403, (method, rest, refused.text)
            assert "beta" in refused.json()["detail"]
            assert own.request(method, path, json={}).status_code not in (401, 403), (method, rest)
        # the service token's campaigns and calls are not a team's either
        assert own.get(f"/campaigns/{admins['id']}").status_code == 403
        for method, path in (
            ("GET", "/teams"),
            ("POST", "/teams"),
            ("DELETE", "/teams/beta"),
            ("POST", "/teams/beta/token"),
        ):
            r = own.request(method, path, json={"name": "gamma"})
            assert r.status_code == 403 and "service token" in r.json()["detail"], (method, path)

    # the last call deleted it: gone from the team's list and count
    assert _listed(url, a) == set()
    with _as(url, ADMIN) as admin:
        assert {t["name"]: t["n_campaigns"] for t in admin.get("/teams").json()}["alpha"] == 0
        assert admin.get(f"/campaigns/{theirs['id']}").status_code == 200  # beta's untouched


def test_a_rotated_or_deleted_teams_old_token_ends_at_once(shared, make_body):
    url = shared
    old = _team(url, "rotor")
    campaign = _create(url, old, make_body)
    with _as(url, ADMIN) as admin:
        new = admin.post("/teams/rotor/token").json()["token"]
    assert new != old
    with _as(url, old) as api:
        assert api.get("/campaigns").status_code == 401
        # a body from the old token is refused before it is read
        assert api.post("/campaigns", json=make_body()).status_code == 401
    assert _listed(url, new) == {campaign["id"]}

    with _as(url, ADMIN) as admin:
        assert admin.delete("/teams/rotor").status_code == 204
        assert admin.delete("/teams/rotor").status_code == 404
        # its campaign stays, the service token's to open; the team stays listed, not live,
        # and its name is not made anew for another group by mistake
        assert admin.get(f"/campaigns/{campaign['id']}").json()["team"] == "rotor"
        listed = {t["name"]: t for t in admin.get("/teams").json()}
        assert not listed["rotor"]["live"] and listed["rotor"]["n_campaigns"] == 1
        taken = admin.post("/teams", json={"name": "rotor"})
        assert taken.status_code == 409 and "still holds campaigns" in taken.json()["detail"]
    with _as(url, new) as api:
        assert api.get(f"/campaigns/{campaign['id']}").status_code == 401
    with _as(url, ADMIN) as admin:  # a rotation makes it live again, with its campaigns
        again = admin.post("/teams/rotor/token").json()["token"]
        assert {t["name"]: t["live"] for t in admin.get("/teams").json()}["rotor"]
    assert _listed(url, again) == {campaign["id"]}
    with _as(url, again) as api:  # once it holds none, a delete removes it and frees its name
        assert api.delete(f"/campaigns/{campaign['id']}").status_code == 204
    with _as(url, ADMIN) as admin:
        assert admin.delete("/teams/rotor").status_code == 204
        assert "rotor" not in {t["name"] for t in admin.get("/teams").json()}
        assert admin.post("/teams/rotor/token").status_code == 404
    _team(url, "rotor")


def test_a_campaign_is_not_created_with_a_team_token_replaced_meanwhile(
    shared, redis_url, make_body
):
    """The store checks, in the transaction that writes the campaign, that the creating token
    is still the team's: a rotation or delete while the request ran leaves nothing behind."""
    from redis import Redis

    from fbgp_al.service.schemas.campaigns import CampaignCreate
    from fbgp_al.service.store import CampaignStore, TeamGone
    from fbgp_al.service.tokens import token_digest

    token = _team(shared, "mover")
    store = CampaignStore(Redis.from_url(redis_url))
    fields = CampaignCreate(**make_body()).model_dump()
    with _as(shared, ADMIN) as admin:
        admin.post("/teams/mover/token")  # the old token is replaced
    before = len(store.campaigns.ids())
    with pytest.raises(TeamGone):
        store.campaigns.create(fields, ("mover", token_digest(token)), LIMIT)
    assert len(store.campaigns.ids()) == before and store.campaigns.ids("mover") == []
    with _as(shared, ADMIN) as admin:
        admin.delete("/teams/mover")
    with pytest.raises(TeamGone):
        store.campaigns.create(fields, ("mover", token_digest(token)), LIMIT)


def test_teams_names_are_checked_and_unique(shared):
    url = shared
    _team(url, "unique-1")
    with _as(url, ADMIN) as admin:
        assert admin.post("/teams", json={"name": "unique-1"}).status_code == 409
        for bad in ("", "Upper", "a b", "-dash", "x" * 65, "a:b", "a/b"):
            r = admin.post("/teams", json={"name": bad})
            assert r.status_code == 422, (bad, r.text)
        assert admin.post("/teams", json={"name": "x", "extra": 1}).status_code == 422


def test_a_team_holds_at_most_its_limit_however_many_requests_race(shared, make_body):
    url = shared
    token = _team(url, "racer")

    def create(i: int) -> int:
        with _as(url, token) as api:
            return api.post("/campaigns", json=make_body(name=f"r{i}")).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(create, range(8)))
    assert sorted(codes) == [201] * LIMIT + [422] * (8 - LIMIT)
    assert len(_listed(url, token)) == LIMIT
    with _as(url, token) as api:
        full = api.post("/campaigns", json=make_body())
        assert full.status_code == 422 and "limit_team_campaigns" in full.json()["detail"]
        api.delete(f"/campaigns/{sorted(_listed(url, token))[0]}")
        assert api.post("/campaigns", json=make_body()).status_code == 201
    # another team, and the service token, are not held by this team's limit
    _create(url, _team(url, "other"), make_body)
    _create(url, ADMIN, make_body)


def test_the_team_command_makes_lists_and_deletes_teams(shared):
    url = shared
    env = fbgp_env(api_token=ADMIN)

    def team(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "fbgp_al.clients.ops.cli", "team", *args, "--url", url],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )

    made = team("create", "cli-team")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("fbgp_") and "shown once" in made.stderr
    assert httpx.get(f"{url}/campaigns", headers={"Authorization": f"Bearer {token}"}).json() == []
    assert "cli-team\t0 campaigns\ttenant " in team("list").stdout
    taken = team("create", "cli-team")
    assert taken.returncode != 0 and "exists already" in taken.stderr
    assert team("delete", "cli-team").returncode == 0
    assert "cli-team" not in team("list").stdout


def test_an_open_service_makes_no_teams(client):
    r = client.post("/teams", json={"name": "nobody"})
    assert r.status_code == 409 and "FBGP_API_TOKEN" in r.json()["detail"]
