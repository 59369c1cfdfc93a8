"""Teams sharing one worker take turns: the refits of one team's many campaigns queue under its
tenant, and another team's refit, queued after all of them, runs next rather than last."""

import httpx
import pytest

from tests.reliability.conftest import slow_campaign, wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

ADMIN = "service-token-for-the-tenant-tests"
# the busy team's first refit: one chain of 6,000 steps on 40 labels, about 2 s, so every refit
# below is queued before it ends; the others' order is that of their starts, whatever their
# length, so they sample less (the same 100 draws)
MCMC = {"chains": 1, "warmup": 3000, "samples": 3000, "thinning": 30}
SHORT_MCMC = {"chains": 1, "warmup": 300, "samples": 300, "thinning": 3}


def _team(url: str, name: str) -> httpx.Client:
    admin = {"Authorization": f"Bearer {ADMIN}"}
    r = httpx.post(f"{url}/teams", json={"name": name}, headers=admin, timeout=30)
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    return httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {token}"})


def test_a_team_queued_after_another_teams_many_refits_runs_next(make_stack):
    stack = make_stack(workers=1, light=False, api_token=ADMIN)
    with _team(stack.url, "busy") as busy, _team(stack.url, "careful") as careful:
        # teams made one after the other get tenants 1 and 2: the careful team's queue comes
        # after the busy one's, so without turns a worker would serve it only once the busy
        # team's queue is empty
        teams = httpx.get(f"{stack.url}/teams", headers={"Authorization": f"Bearer {ADMIN}"})
        assert {t["name"]: t["tenant"] for t in teams.json()} == {"busy": 1, "careful": 2}
        many = [slow_campaign(busy, mcmc=MCMC if k == 0 else SHORT_MCMC)[0] for k in range(4)]
        mine = slow_campaign(careful, mcmc=SHORT_MCMC)[0]
        queued = busy.get(f"/campaigns/{many[-1]}").json()
        assert queued["refit"] == "queued" and queued["team"] == "busy"  # not yet run

        def started(client: httpx.Client, campaign: str) -> float | None:
            r = client.get(f"/campaigns/{campaign}/model")
            return r.json()["diagnostics"]["started_at"] if r.status_code == 200 else None

        wait_for(
            lambda: all(started(busy, c) for c in many) and started(careful, mine),
            seconds=180,
            every=0.25,
        )
        order = sorted([(started(busy, c), c) for c in many] + [(started(careful, mine), mine)])
    # one worker: the busy team's first refit ran first, then the other team's, then the rest
    assert [c for _, c in order][:2] == [many[0], mine], order
