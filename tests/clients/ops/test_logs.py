"""The logs of ``fbgp-al up``'s parts rotate by size with a bounded count of files, keep every
line whole, and cut a line past the cap: on real pipes of real processes, and on a real stack's
API under a flood of requests (before, its api.log grew without bound)."""

import re
import subprocess
import sys

import httpx
import pytest

from fbgp_al.clients.ops.logs import CUT, MAX_LINE_BYTES, RotatingLog
from fbgp_al.clients.ops.stack import LocalStack, fbgp_env
from fbgp_al.service.settings import get_settings


def _files(path):
    """The log's files, oldest first."""
    rotated = sorted(path.parent.glob(path.name + ".*"), key=lambda p: -int(p.suffix[1:]))
    return [*rotated, path]


def _run(log: RotatingLog, code: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    log.pump(process.stdout)
    assert process.wait(timeout=60) == 0


def test_a_parts_output_rotates_by_size_and_keeps_every_line_whole(tmp_path):
    path = tmp_path / "worker-0.log"
    log = RotatingLog(path, max_bytes=2000, backups=3)
    _run(
        log,
        "import sys\nfor i in range(1000): print(f'line {i:05d} ' + 'x' * 40, "
        "file=sys.stderr if i % 2 else sys.stdout, flush=True)",
    )
    log.close()
    files = _files(path)
    assert [p.name for p in files] == [f"worker-0.log.{k}" for k in (3, 2, 1)] + ["worker-0.log"]
    assert all(p.stat().st_size <= 2000 for p in files), [p.stat().st_size for p in files]
    lines = [line for p in files for line in p.read_text().splitlines()]
    numbers = [int(re.fullmatch(r"line (\d{5}) x{40}", line).group(1)) for line in lines]
    assert numbers == list(range(1000 - len(numbers), 1000))  # the latest, none lost or split


def test_a_line_past_the_cap_is_cut_and_the_next_one_kept(tmp_path):
    path = tmp_path / "api.log"
    log = RotatingLog(path, max_bytes=10 * MAX_LINE_BYTES, backups=1)
    _run(log, "print('a' * 1_000_000); print('next'); print('last', end='')")
    log.close()
    first, *rest = path.read_bytes().split(b"\n")
    assert first + b"\n" == b"a" * MAX_LINE_BYTES + CUT
    assert rest == [b"next", b"last", b""]


@pytest.fixture
def small_logs(monkeypatch):
    monkeypatch.setenv("FBGP_LOG_FILE_BYTES", "20000")
    monkeypatch.setenv("FBGP_LOG_FILE_BACKUPS", "2")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_stacks_api_log_rotates_under_a_flood_of_requests(tmp_path, small_logs):
    """An unauthenticated flood (here 404s, each one JSON line): api.log and two rotated files
    of at most 20,000 bytes each, holding the latest requests in order, none lost between."""
    with LocalStack(tmp_path, workers=1, env=fbgp_env()) as stack:
        stack.start()
        with httpx.Client(base_url=stack.url) as client:
            for i in range(600):
                assert client.get(f"/campaigns/flood{i:05d}").status_code == 404
    files = _files(tmp_path / "api.log")
    assert [p.name for p in files] == ["api.log.2", "api.log.1", "api.log"]
    assert all(p.stat().st_size <= 20000 for p in files), [p.stat().st_size for p in files]
    seen = [int(m) for p in files for m in re.findall(r'"campaign": "flood(\d{5})"', p.read_text())]
    assert seen and seen == list(range(600 - len(seen), 600)), seen
    assert "Ready to accept connections" in (tmp_path / "redis.log").read_text()
