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


@lru_cache
def get_settings() -> Settings:
    return Settings()
