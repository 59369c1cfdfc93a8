"""Deployment settings (:mod:`service.settings`), read from the environment."""

import pytest

from fbgp_al.service.settings import Settings


@pytest.mark.parametrize("limit", ["limit_mcmc_iterations", "limit_labels", "limit_pending"])
def test_a_limit_is_read_from_the_environment(monkeypatch, limit):
    monkeypatch.setenv(f"FBGP_{limit.upper()}", "7")
    assert getattr(Settings(), limit) == 7
