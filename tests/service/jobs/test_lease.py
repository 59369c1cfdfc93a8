"""A refit's lease (:mod:`service.jobs.lease`), on a store no worker serves: the refit in charge
keeps its heartbeat fresh while it runs, and no longer once it ends; a refit no longer in charge
(another was revived in its place) exits instead of going on."""

import os
import subprocess
import sys
import textwrap
import time

from fbgp_al.service import keys
from fbgp_al.service.jobs.lease import lease
from fbgp_al.service.schemas.campaigns import CampaignCreate
from fbgp_al.service.settings import get_settings
from tests.conftest import ROOT


def _running(store, make_body, token: str) -> str:
    campaign = store.campaigns.create(CampaignCreate(**make_body()).model_dump())["id"]
    store.r.hset(
        keys.campaign(campaign, "state"),
        mapping={"refit": "running", "refit_job": token, "heartbeat": 0.0},
    )
    return campaign


def _heartbeat(store, campaign: str) -> float:
    return float(store.campaigns.state(campaign)["heartbeat"])


def test_the_refit_in_charge_beats_while_it_runs(bare_store, make_body, monkeypatch):
    monkeypatch.setenv("FBGP_HEARTBEAT_SECONDS", "0.05")
    get_settings.cache_clear()
    try:
        campaign = _running(bare_store, make_body, "job-1")
        with lease(bare_store, campaign, "job-1"):
            time.sleep(0.5)
            assert time.time() - _heartbeat(bare_store, campaign) < 0.3
        ended = _heartbeat(bare_store, campaign)
        time.sleep(0.3)
        assert _heartbeat(bare_store, campaign) == ended  # no beat once the refit ended
    finally:
        get_settings.cache_clear()


def test_a_refit_no_longer_in_charge_exits(bare_store, make_body, redis_url):
    campaign = _running(bare_store, make_body, "the-refit-now")
    url = redis_url.rsplit("/", 1)[0] + "/13"  # the store's database
    code = textwrap.dedent(f"""
        import time
        from redis import Redis
        from fbgp_al.service.store import CampaignStore
        from fbgp_al.service.jobs.lease import lease
        with lease(CampaignStore(Redis.from_url({url!r})), {campaign!r}, "an-old-refit"):
            time.sleep(60)
    """)
    env = dict(os.environ, FBGP_HEARTBEAT_SECONDS="0.1")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 75, done.stderr[-2000:]
    assert time.monotonic() - began < 30 and "no longer in charge" in done.stderr
    assert _heartbeat(bare_store, campaign) == 0.0  # the old refit's beat was refused
