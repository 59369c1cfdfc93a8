"""Teams (:mod:`service.store.teams`): teams are given the tenants fewest teams have."""

import json

from redis import Redis

from fbgp_al.service.keys import TEAM_DIGESTS, TEAMS
from fbgp_al.service.queues import REFITS, TENANTS, campaign_tenant, refit_queue, tenant
from fbgp_al.service.settings import Settings
from fbgp_al.service.store import CampaignStore


def test_teams_are_given_the_tenants_fewest_teams_have(client, settings, make_body):
    """Seven teams, seven tenants; the eighth shares the lowest; a deleted team's tenant is
    free for the next; a team's campaign records its tenant and refits in its queue."""
    store = CampaignStore(Redis.from_url(settings.redis_url))
    for k in range(TENANTS):
        assert isinstance(store.teams.create(f"team-{k}", float(k)), str)
    tenants = {t["name"]: t["tenant"] for t in store.teams.all()}
    assert [tenants[f"team-{k}"] for k in range(TENANTS)] == [*range(1, TENANTS), 1]
    assert store.teams.delete("team-2")  # tenant 3; it held no campaign: its record goes
    store.teams.create("late", 9.0)
    assert {t["name"]: t["tenant"] for t in store.teams.all()}["late"] == 3
    spec = store.campaigns.create(
        make_body(), ("late", store.r.hget(TEAM_DIGESTS, "late").decode()), 10
    )
    assert spec["tenant"] == 3 and store.campaigns.spec(spec["id"])["tenant"] == 3
    assert refit_queue(spec, 3, None, Settings()) == REFITS[3]
    # a team made before tenants were given: its name's, for it and its campaigns
    store.r.hset(TEAMS, "old", json.dumps({"created_at": 0.0}))
    assert store.teams.tenant("old") == tenant("old")
    assert campaign_tenant({"team": "old"}) == tenant("old") and campaign_tenant({}) == 0
