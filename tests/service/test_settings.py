"""Deployment settings (:mod:`service.settings`), read from the environment."""

import pytest

from fbgp_al.service.settings import Settings


@pytest.mark.parametrize("limit", ["limit_mcmc_iterations", "limit_labels", "limit_pending"])
def test_a_limit_is_read_from_the_environment(monkeypatch, limit):
    monkeypatch.setenv(f"FBGP_{limit.upper()}", "7")
    assert getattr(Settings(), limit) == 7


def test_tls_files_go_to_redis_py_with_a_rediss_url_only(monkeypatch):
    monkeypatch.setenv("FBGP_REDIS_URL", "rediss://:pw@redis.example:6379/0")
    monkeypatch.setenv("FBGP_REDIS_CA_FILE", "/etc/ca.crt")
    options = Settings().redis_options()
    assert options["ssl_ca_certs"] == "/etc/ca.crt"
    assert options["ssl_cert_reqs"] == "required" and options["ssl_check_hostname"] is True
    assert options["ssl_certfile"] is None  # no client certificate unless given
    monkeypatch.setenv("FBGP_REDIS_URL", "redis://:pw@redis.example:6379/0")
    monkeypatch.delenv("FBGP_REDIS_CA_FILE")
    assert Settings().redis_options() == {}


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"redis_ca_file": "/etc/ca.crt"}, "not rediss://"),
        (
            {"redis_url": "rediss://h:1/0", "redis_cert_file": "/etc/client.crt"},
            "go together",
        ),
    ],
)
def test_tls_settings_that_would_not_do_what_they_say_are_refused(given, said):
    with pytest.raises(ValueError, match=said):
        Settings(**given)
