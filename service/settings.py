"""Deployment settings, read from the environment (``FBGP_*``)."""

from __future__ import annotations

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FBGP_")

    redis_url: str = "redis://127.0.0.1:6379/0"
    api_token: str | None = None
    # seconds the API waits for a prediction or evaluation job before answering 503
    job_wait_seconds: float = 120.0
    # longest long poll a client may ask of /next
    max_wait_seconds: float = 60.0
    # largest request body the API reads (413 beyond it)
    max_body_bytes: int = 16 * 1024 * 1024
    # a model call no worker took in time (503): the client asks again after this (Retry-After)
    busy_retry_after_seconds: int = 5
    # Redis unreachable (503): the client asks again after this (Retry-After)
    store_retry_after_seconds: int = 2
    # a long poll of /next looks again at least this often without a wake-up (a message lost,
    # a lease run out); it is woken at once when the campaign changes
    next_poll_seconds: float = 1.0
    # the lock that serializes the choice of points for one campaign across API processes:
    # held at most this long, waited for at most this long
    lock_timeout_seconds: float = 10.0

    # A running refit writes a heartbeat into its campaign's state this often; a refit whose
    # heartbeat is older than ``refit_lease_seconds`` is taken for dead and enqueued again.
    heartbeat_seconds: float = 2.0
    refit_lease_seconds: float = 15.0
    # RQ: an idle worker's registration lives worker_ttl + 60 s, a busy one's
    # job_monitoring_interval + 60 s; stuck campaigns are looked for every maintenance_interval.
    worker_ttl: int = 30
    job_monitoring_interval: int = 5
    maintenance_interval: int = 20


@lru_cache
def get_settings() -> Settings:
    return Settings()
