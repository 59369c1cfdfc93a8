"""The wake-ups of ``/next``'s long polls (:mod:`service.store.pollers`), against the real
Redis: a wake-up is a message on the wake channel that names the campaign; with Redis away, it
is logged and not raised (what was stored stays stored)."""

import logging
import time

from redis import Redis

from fbgp_al.clients.ops.stack import free_port
from fbgp_al.service.keys import WAKE_CHANNEL
from fbgp_al.service.store import CampaignStore


def test_a_wake_up_names_its_campaign_on_the_wake_channel(bare_store):
    listener = bare_store.r.pubsub(ignore_subscribe_messages=True)
    listener.subscribe(WAKE_CHANNEL)
    bare_store.pollers.wake("c0ffee")
    deadline = time.monotonic() + 5
    message = None
    while message is None and time.monotonic() < deadline:
        message = listener.get_message(timeout=0.1)
    listener.close()
    assert message is not None and message["data"] == b"c0ffee"


def test_a_wake_up_that_cannot_be_sent_is_logged_not_raised(caplog):
    nowhere = Redis(port=free_port(), socket_connect_timeout=0.2)  # nothing listens there
    with caplog.at_level(logging.WARNING, logger="fbgp.store"):
        CampaignStore(nowhere).pollers.wake("c0ffee")
    assert "wake-up of campaign c0ffee not published" in caplog.text
