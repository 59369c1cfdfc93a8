"""The API in process on the tests' Redis and worker, a second worker beside it, and a store on a
database no worker serves (:mod:`tests.service.conftest`'s fixtures), for the jobs' tests."""

from tests.service.conftest import bare_store, client, second_worker, settings  # noqa: F401
