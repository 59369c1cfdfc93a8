"""The store's Lua scripts: read from their ``.lua`` files with the fragments they need, each
once, and registered once per Redis client however many stores are built on it."""

from __future__ import annotations

from redis import Redis

from fbgp_al.service.keys import campaign as campaign_key
from fbgp_al.service.store import CampaignStore, scripts


def test_the_scripts_are_registered_once_per_client(redis_url):
    client = Redis.from_url(redis_url)
    first, second = CampaignStore(client), CampaignStore(client)
    assert first.s is second.s
    assert first.s.label is second.s.label
    assert CampaignStore(Redis.from_url(redis_url)).s is not first.s  # another client


def test_each_script_has_its_fragments_once_and_every_file_is_used():
    needed, todo = set(), list(scripts.NAMES)
    while todo:  # the fragments the scripts need, and those these need
        for needs in scripts.NEEDS.findall((scripts.HERE / f"{todo.pop()}.lua").read_text()):
            todo += set(needs.split()) - needed
            needed |= set(needs.split())
    for name in scripts.NAMES:
        text = scripts.source(name)
        # a function a fragment defines is defined once in the script that needs it
        for line in {ln for ln in text.splitlines() if ln.startswith("local function ")}:
            assert text.count(line) == 1, (name, line)
    assert scripts.source("label").count("local function phase(") == 1
    assert "local function request_refit(" in scripts.source("label")
    files = {p.stem for p in scripts.HERE.glob("*.lua")}
    assert files == set(scripts.NAMES) | needed


def test_a_script_runs_on_the_server(redis_url):
    store = CampaignStore(Redis.from_url(redis_url.rsplit("/", 1)[0] + "/11"))
    store.r.flushdb()
    keys = [campaign_key("c", "spec"), campaign_key("c", "jobs")]
    assert store.s.track(keys=keys, args=[0, 10, "refit:j"]) == 0  # no campaign: nothing noted
    store.r.set(keys[0], "{}")
    assert store.s.track(keys=keys, args=[0, 10, "refit:j"]) == 1
    assert store.r.zrange(keys[1], 0, -1) == [b"refit:j"]
    store.r.flushdb()
