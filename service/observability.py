"""Metrics (Prometheus text format) and structured JSON log lines.

Counters that several processes add to (labels stored, runs, refit seconds) live in Redis
(:mod:`service.store.counters`), so every API process reports the same totals and they survive
restarts; request counts and latencies are per API process. Queue depths, failed jobs
and the count of campaigns by state (kept by the store's scripts) are read from Redis when
``/metrics`` is scraped: a few keys, and one pipelined read per campaign of its count of failed
runs, then the state of those with a failed run (``failing`` and ``stalled`` are counted apart
from ``design`` and ``active``).
"""

from __future__ import annotations

import json
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis import Redis
from rq.registry import FailedJobRegistry

from fbgp_al.service import capacity
from fbgp_al.service.queues import QUEUES, queue
from fbgp_al.service.settings import Settings


class RedisCollector:
    """What the store knows, read at scrape time."""

    def __init__(self, redis: Redis, store, settings: Settings):
        self.redis = redis
        self.store = store
        self.settings = settings

    def collect(self):
        redis = self.redis
        depth = GaugeMetricFamily("fbgp_queue_depth", "jobs waiting per queue", labels=["queue"])
        failed = GaugeMetricFamily(
            "fbgp_jobs_failed", "jobs in the failed registry", labels=["queue"]
        )
        for name in QUEUES:
            depth.add_metric([name], queue(name, redis).count)
            failed.add_metric([name], FailedJobRegistry(queue=queue(name, redis)).count)
        yield depth
        yield failed
        totals = self.store.counters.totals()
        labels = CounterMetricFamily("fbgp_labels_stored", "labels stored (posted or imported)")
        labels.add_metric([], totals.labels)
        yield labels
        for kind, count in totals.runs.items():
            counter = CounterMetricFamily(f"fbgp_runs_{kind}", f"tickets whose run was {kind}")
            counter.add_metric([], count)
            yield counter
        refit = HistogramMetricFamily("fbgp_refit_seconds", "seconds per refit (NUTS and scoring)")
        refit.add_metric([], totals.buckets, sum_value=totals.refit_seconds)
        yield refit
        campaigns = GaugeMetricFamily("fbgp_campaigns", "campaigns by state", labels=["state"])
        for state, count in self.store.census.count_by_state(time.time()).items():
            campaigns.add_metric([state], count)
        yield campaigns
        yield from self._capacity()

    def _capacity(self):
        """Redis's memory and the data directory's disk (:mod:`service.capacity`)."""
        room = capacity.read(self.redis, self.settings)
        gauges = [
            ("fbgp_redis_memory_bytes", "Redis's used memory", room.memory_bytes),
            (
                "fbgp_redis_memory_limit_bytes",
                "Redis's maxmemory, or the machine's memory when it has none",
                room.memory_limit,
            ),
            (
                "fbgp_redis_aof_write_ok",
                "1 while Redis's last write of its append-only file succeeded",
                int(room.aof_ok),
            ),
            (
                "fbgp_data_disk_free_bytes",
                "free space on the disk of Redis's data directory (FBGP_DATA_DIR)",
                room.disk_free,
            ),
            ("fbgp_data_disk_size_bytes", "size of that disk", room.disk_total),
        ]
        for name, text, value in gauges:
            if value is not None:
                gauge = GaugeMetricFamily(name, text)
                gauge.add_metric([], value)
                yield gauge
        state = GaugeMetricFamily(
            "fbgp_capacity_state",
            "1 for the state /readyz reports for Redis's memory and disk",
            labels=["state"],
        )
        now, _ = room.verdict(self.settings)
        for name in (capacity.READY, capacity.DEGRADED, capacity.UNAVAILABLE):
            state.add_metric([name], int(name == now))
        yield state


class Metrics:
    """The API process's own request metrics (the shared ones come from :class:`RedisCollector`
    at scrape time)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        labels = ["method", "route", "status"]
        self.requests = Counter(
            "fbgp_http_requests", "HTTP requests", labels, registry=self.registry
        )
        self.latency = Histogram(
            "fbgp_http_request_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )


def cut(text: str, most: int) -> str:
    """``text``, or its first ``most`` characters and how many more there were."""
    return text if len(text) <= most else f"{text[:most]}... ({len(text) - most} more)"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any of :attr:`FIELDS`
    passed in ``extra`` (``waited``: the seconds a long poll of ``/next`` spent waiting).

    A line's size is bounded whatever a client sends: a text field (an id, a route, a method)
    is cut at ``FIELD_CHARS`` characters, the message (which may quote a path or a reason) at
    ``MESSAGE_CHARS``, a traceback at ``ERROR_CHARS`` (a 60,000-character id was logged whole)."""

    FIELDS = ("campaign", "job", "method", "route", "status", "seconds", "waited", "version")
    FIELD_CHARS = 100
    MESSAGE_CHARS = 2_000
    ERROR_CHARS = 20_000

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": cut(record.getMessage(), self.MESSAGE_CHARS),
        }
        for name in self.FIELDS:
            if hasattr(record, name):
                value = getattr(record, name)
                out[name] = cut(value, self.FIELD_CHARS) if isinstance(value, str) else value
        if record.exc_info:
            out["error"] = cut(self.formatException(record.exc_info), self.ERROR_CHARS)
        return json.dumps(out)


def json_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
