"""The ``fbgp-al`` command (:mod:`clients.ops.cli`): ``healthcheck``, for either role."""

from fbgp_al.clients.ops.cli import main


def test_healthcheck_auto_is_healthy_for_either_role_and_the_roles_check_their_own(
    redis_url, monkeypatch
):
    """One image runs the API or a worker: its HEALTHCHECK (``healthcheck``, role ``auto``)
    passes when the API answers or when a worker of this host has a fresh heartbeat."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from redis import Redis
    from rq import Worker

    from fbgp_al.clients.ops.stack import free_port
    from fbgp_al.service.settings import get_settings

    def exit_code(*args: str) -> int:
        try:
            main(["healthcheck", *args])
        except SystemExit as done:
            return done.code
        raise AssertionError("healthcheck did not exit")

    url = redis_url.rsplit("/", 1)[0] + "/7"  # a database of its own: no test's worker is in it
    connection = Redis.from_url(url)
    connection.flushdb()
    monkeypatch.setenv("FBGP_REDIS_URL", url)
    get_settings.cache_clear()
    nothing = f"http://127.0.0.1:{free_port()}"
    try:
        assert exit_code("--url", nothing) == 1  # neither an API nor a worker
        assert exit_code("api", "--url", nothing) == 1
        assert exit_code("worker") == 1

        class Healthz(BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if self.path == "/healthz" else 404)
                self.end_headers()

            def log_message(self, *args):
                pass

        server = HTTPServer(("127.0.0.1", 0), Healthz)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        api = f"http://127.0.0.1:{server.server_port}"
        try:
            assert exit_code("--url", api) == 0
            assert exit_code("api", "--url", api) == 0
            assert exit_code("worker", "--url", api) == 1  # a worker's check asks Redis only
        finally:
            server.shutdown()
            server.server_close()

        elsewhere = Worker(["default"], connection=connection, name="elsewhere")
        elsewhere.hostname = "another-host"
        elsewhere.register_birth()
        assert exit_code("--url", nothing) == 1  # another host's worker does not count
        mine = Worker(["default"], connection=connection, name="mine")
        mine.register_birth()
        assert exit_code("--url", nothing) == 0
        assert exit_code("worker") == 0
        assert exit_code("api", "--url", nothing) == 1
        connection.hset(mine.key, "last_heartbeat", "2000-01-01T00:00:00.000000Z")
        assert exit_code("--url", nothing) == 1  # a stale heartbeat: the worker is gone
    finally:
        connection.flushdb()
        get_settings.cache_clear()
