"""Campaign access tokens: handed out once, kept only as their SHA-256."""

from __future__ import annotations

import hashlib
import secrets

# Every token starts with this: it marks the token as this service's (for secret scanners) and
# keeps it from starting with "-", which a command line takes for an option (`--token -x...`).
PREFIX = "fbgp_"


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
