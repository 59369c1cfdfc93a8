"""How near full Redis's memory and its data directory's disk are, for ``/readyz`` and
``/metrics``: so that an operator hears of it before Redis refuses the writes every label needs
(``appendfsync always``: a label is acknowledged only once it is on disk).

- Redis's memory (``INFO memory``): ``used_memory`` against its ``maxmemory``, or against the
  machine's memory when none is set. Past ``redis_memory_max_fraction`` of it: degraded. At a
  ``maxmemory`` with the ``noeviction`` policy Redis refuses writes: unavailable. Another policy
  would evict campaigns' keys once full: degraded, whatever the use.
- The data directory's disk (``data_dir``: ``fbgp-al up`` sets it; in compose, Redis's volume
  mounted in the API's container): below ``disk_free_min_bytes`` free, degraded.
- Redis's last write of its append-only file failed (``INFO persistence``,
  ``aof_last_write_status``: a full disk): unavailable, since it refuses writes until one
  succeeds.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from redis import Redis

from fbgp_al.service.settings import Settings

READY, DEGRADED, UNAVAILABLE = "ready", "degraded", "unavailable"


def _size(n: float) -> str:
    """Bytes in a few characters: ``1.5 GiB``."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Capacity:
    """What Redis and the data directory's disk hold now (:func:`read`)."""

    memory_bytes: int
    maxmemory: int  # 0: none set
    system_memory: int  # 0: not reported
    policy: str
    aof_ok: bool
    disk_free: int | None = None  # None: no data_dir set, or it cannot be read
    disk_total: int | None = None

    @property
    def memory_limit(self) -> int | None:
        """What Redis's memory is judged against: its maxmemory, else the machine's."""
        return self.maxmemory or self.system_memory or None

    def verdict(self, settings: Settings) -> tuple[str, str | None]:
        """``(READY | DEGRADED | UNAVAILABLE, what is wrong)``, the worst first."""
        if not self.aof_ok:
            return UNAVAILABLE, (
                "Redis could not write its append-only file (is its disk "
                "full?): it refuses writes, labels included"
            )
        full = self.maxmemory and self.memory_bytes >= self.maxmemory
        if full and self.policy == "noeviction":
            return UNAVAILABLE, (
                f"Redis's memory is full ({_size(self.memory_bytes)} of its "
                f"maxmemory {_size(self.maxmemory)}): it refuses writes, "
                "labels included"
            )
        warnings = []
        limit = self.memory_limit
        if limit and self.memory_bytes > settings.redis_memory_max_fraction * limit:
            of = "its maxmemory" if self.maxmemory else "the machine's memory"
            warnings.append(
                f"Redis's memory is nearly full: {_size(self.memory_bytes)} of "
                f"{of} {_size(limit)} (FBGP_REDIS_MEMORY_MAX_FRACTION "
                f"{settings.redis_memory_max_fraction:g})"
            )
        if self.maxmemory and self.policy != "noeviction":
            warnings.append(
                f"Redis's maxmemory-policy is {self.policy}: once full it evicts "
                "campaigns' keys (set noeviction)"
            )
        if settings.data_dir and self.disk_free is None:
            warnings.append(
                f"the data directory FBGP_DATA_DIR ({settings.data_dir}) cannot be "
                "read: its free disk is unknown"
            )
        elif self.disk_free is not None and self.disk_free < settings.disk_free_min_bytes:
            warnings.append(
                f"the data directory's disk is nearly full: {_size(self.disk_free)} "
                f"free of {_size(self.disk_total or 0)} "
                f"(FBGP_DISK_FREE_MIN_BYTES {_size(settings.disk_free_min_bytes)})"
            )
        return (DEGRADED, "; ".join(warnings)) if warnings else (READY, None)


def read(redis: Redis, settings: Settings) -> Capacity:
    """Redis's ``INFO memory`` and ``INFO persistence``, and the free disk of ``data_dir``."""
    pipe = redis.pipeline(transaction=False)
    pipe.info("memory")
    pipe.info("persistence")
    memory, persistence = pipe.execute()
    free = total = None
    if settings.data_dir:
        try:
            usage = shutil.disk_usage(settings.data_dir)
            free, total = usage.free, usage.total
        except OSError:
            pass
    return Capacity(
        memory_bytes=int(memory["used_memory"]),
        maxmemory=int(memory.get("maxmemory", 0)),
        system_memory=int(memory.get("total_system_memory", 0)),
        policy=str(memory.get("maxmemory_policy", "noeviction")),
        aof_ok=persistence.get("aof_last_write_status", "ok") == "ok",
        disk_free=free,
        disk_total=total,
    )
