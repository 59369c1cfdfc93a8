"""What a fanned-out refit's parts share (:mod:`service.store.groups`), against the real Redis:
a group's note always matches its draws, both expire, and a refit's forget leaves no key; a
scoring kept in parts gives each part back by where it starts, until it is forgotten."""

import json

import numpy as np

from fbgp_al.service import keys


def test_the_groups_notes_match_their_draws_expire_and_are_forgotten(bare_store):
    groups = bare_store.groups
    token = "refit-1"
    draws = np.arange(6, dtype=np.float64).tobytes()
    groups.publish(token, "0", json.dumps({"shape": [1, 2, 3]}), draws, ttl=60)
    groups.say(token, "3", json.dumps({"shape": [2, 0, 3]}))
    notes, kept = groups.notes_and_draws(token)
    assert {k: json.loads(v)["shape"] for k, v in notes.items()} == {
        b"0": [1, 2, 3],
        b"3": [2, 0, 3],
    }
    assert kept == {b"0": draws} and groups.notes(token) == notes
    assert all(0 < bare_store.r.ttl(k) <= 60 for k in keys.chain_groups(token))
    groups.forget(token)
    assert not any(bare_store.r.exists(k) for k in keys.chain_groups(token))


def test_a_scoring_kept_in_parts_gives_each_part_back_until_forgotten(bare_store):
    groups = bare_store.groups
    key = groups.keep_scoring('{"name": "qb-mgp"}', {"candidates:512": "[1]"}, ttl=30)
    assert key.startswith(keys.scoring(""))
    assert groups.scoring_part(key, 512) == (b'{"name": "qb-mgp"}', b"[1]")
    assert groups.scoring_part(key, 0) == (b'{"name": "qb-mgp"}', None)
    assert 0 < bare_store.r.ttl(key) <= 30
    groups.forget_scoring(key)
    assert groups.scoring_part(key, 512) == (None, None)
