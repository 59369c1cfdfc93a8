"""Redis stopped and started again, its append-only file replayed slowly, while campaigns' and
teams' tokens import, label and read: every answer is a 2xx, or a 503 with ``Retry-After``
(never a 500: the token's look-up before a body is read meets the outage too), and every
acknowledged label and import is there afterwards."""

import shlex
import shutil
import signal
import subprocess
import time
from collections import Counter

import httpx
import pytest
from redis import Redis

from tests.reliability.conftest import wait_for

pytestmark = pytest.mark.slow  # a fault test: `make test-fast` leaves it out

ADMIN = "outage-admin-token"
BODY = {
    "name": "outage",
    "inputs": [{"name": "x", "lower": 0.5, "upper": 2.5}],
    "pool": {"type": "grid", "points_per_dim": 1001},
    "initial_design": {"type": "maximin-lhs", "size": 3},
    "max_labels": 500,
    "mcmc": {"chains": 1, "warmup": 20, "samples": 10, "thinning": 2},
    "mode": "parallel",
    "max_pending": 50,
    "seed": 4,
}


def _restart_redis_slowly(stack) -> subprocess.Popen:
    """The stack's redis-server started again on its directory, loading its append-only file's
    base a key at a time (``key-load-delay``, µs per key) and answering ``LOADING`` meanwhile
    (events every KiB read)."""
    options = (
        f"--port {stack.redis_port} --bind 127.0.0.1 --appendonly yes --appendfsync always "
        "--save '' --key-load-delay 150 --loading-process-events-interval-bytes 1024"
    )
    data = stack.data_dir.resolve()
    command = [shutil.which("redis-server"), "-", *shlex.split(options), "--dir", str(data)]
    command += ["--logfile", str(data / "redis-again.log")]
    process = subprocess.Popen(command, stdin=subprocess.PIPE)
    process.stdin.write(f"requirepass {stack.redis_password}\n".encode())
    process.stdin.close()
    return process


def test_every_answer_is_a_2xx_or_a_503_with_retry_after_while_redis_restarts(make_stack):
    stack = make_stack(workers=1, api_token=ADMIN)
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=stack.url, timeout=30) as api:
        team = api.post("/teams", json={"name": "outage"}, headers=admin).json()["token"]
        as_team = {"Authorization": f"Bearer {team}"}
        created = api.post("/campaigns", json=BODY, headers=as_team).json()
        campaign = created["id"]
        as_simulator = {"Authorization": f"Bearer {created['token']}"}
        as_owner = {"Authorization": f"Bearer {created['owner_token']}"}
        # ballast in the append-only file's base, so that loading it takes seconds
        redis = Redis.from_url(stack.redis_url)
        for k in range(5):
            redis.mset({f"ballast:{k}:{i}": "x" for i in range(5000)})
        redis.bgrewriteaof()
        wait_for(
            lambda: (
                not redis.info("persistence")["aof_rewrite_in_progress"]
                and not redis.info("persistence")["aof_rewrite_scheduled"]
            ),
            60,
        )

        answers: list[tuple[str, int, dict]] = []
        imported, labeled = [], []

        def call(name: str, method: str, path: str, **options) -> httpx.Response:
            r = api.request(method, f"/campaigns/{campaign}{path}", **options)
            answers.append((name, r.status_code, dict(r.headers), r.text))
            return r

        def round_of_calls(k: int) -> None:
            y = 0.001 * k
            r = call(
                "import",
                "POST",
                "/observations",
                headers=as_team,
                json={"x": [[0.5 + (k % 2000) / 1000]], "y": [y]},
            )
            if r.status_code == 201:
                imported.append(y)
            r = call("next", "GET", "/next", headers=as_simulator)
            if r.status_code == 200:
                r = call(
                    "label",
                    "POST",
                    "/label",
                    headers=as_simulator,
                    json={"ticket": r.json()["ticket"], "y": -y},
                )
                if r.status_code == 201:
                    labeled.append(-y)
            call("status", "GET", "", headers=as_owner)
            call("observations", "GET", "/observations", headers=as_owner)
            call("team's status", "GET", "", headers=as_team)

        k = 0
        for _ in range(5):  # before: all answer
            round_of_calls(k := k + 1)
        stack.kill_redis(signal.SIGTERM)  # stopped: its file fsynced
        for _ in range(5):
            round_of_calls(k := k + 1)
        stack.redis = _restart_redis_slowly(stack)
        began = time.monotonic()
        while time.monotonic() < began + 60:
            round_of_calls(k := k + 1)
            try:
                if redis.ping() and time.monotonic() > began + 1:
                    break
            except Exception:  # still loading
                continue
        for _ in range(5):  # after: all answer again
            round_of_calls(k := k + 1)

        bad = [
            (name, status, text)
            for name, status, headers, text in answers
            if not (200 <= status < 300 or (status == 503 and headers.get("retry-after")))
        ]
        assert not bad, bad[:5]
        unavailable = [text for _, status, _, text in answers if status == 503]
        posts = [
            name for name, status, _, _ in answers if status == 503 and name in ("import", "label")
        ]
        assert posts, "no POST met the outage"
        assert any("loading" in text for text in unavailable), "none met Redis loading"
        assert all(s < 300 for _, s, _, _ in answers[-25:]), answers[-25:]
        stored = api.get(f"/campaigns/{campaign}/observations", headers=as_owner).json()["y"]
        missing = Counter(imported + labeled) - Counter(stored)
        assert not missing, missing
