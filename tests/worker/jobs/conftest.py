"""The API in process on the tests' Redis and worker, and a second worker beside it
(:mod:`tests.service.conftest`'s fixtures), for the fan-out's tests that refit through the
service."""

from tests.service.conftest import client, second_worker, settings  # noqa: F401
