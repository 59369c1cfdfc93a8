"""What the parts of a fanned-out refit share while they run: the chain groups' notes and
latest draws (each group's, by the name of its first chain; :class:`service.jobs.fanout.Peers`
says what they mean), and a scoring split in parts (the :class:`worker.scoring.Scoring`
as JSON and each part's candidates; :func:`service.jobs.share_scoring`). Both are kept
for a bounded time and deleted by the refit once it is done with them."""

from __future__ import annotations

import uuid

from fbgp_al.service import keys
from fbgp_al.service.store.noun import Noun


class Groups(Noun):
    """The chain groups' notes and draws, and the scorings shared in parts."""

    def publish(self, token: str, me: str, note: str, draws: bytes, ttl: int) -> None:
        """Group ``me``'s latest draws and its note, in one transaction (a note always matches
        its draws), both kept ``ttl`` seconds from now."""
        key, draws_key = keys.chain_groups(token)
        with self.r.pipeline() as pipe:
            pipe.hset(draws_key, me, draws)
            pipe.hset(key, me, note)
            for k in (key, draws_key):
                pipe.expire(k, ttl)
            pipe.execute()

    def say(self, token: str, me: str, note: str) -> None:
        """Group ``me``'s note again."""
        self.r.hset(keys.chain_groups(token)[0], me, note)

    def notes(self, token: str) -> dict[bytes, bytes]:
        """Every group's note, by name."""
        return self.r.hgetall(keys.chain_groups(token)[0])

    def notes_and_draws(self, token: str) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
        """Every group's note and draws, read in one transaction."""
        key, draws_key = keys.chain_groups(token)
        with self.r.pipeline() as pipe:
            return tuple(pipe.hgetall(key).hgetall(draws_key).execute())

    def forget(self, token: str) -> None:
        """The groups' notes and draws, deleted (the merge has their results)."""
        self.r.delete(*keys.chain_groups(token))

    def keep_scoring(self, scoring: str, parts: dict[str, str], ttl: int) -> str:
        """A scoring (as JSON) and its parts' candidates (``candidates:<start>``: packed), kept
        ``ttl`` seconds under a new key, which the parts' jobs are given."""
        key = keys.scoring(uuid.uuid4().hex)
        with self.r.pipeline() as pipe:
            pipe.hset(key, mapping={"scoring": scoring, **parts})
            pipe.expire(key, ttl)
            pipe.execute()
        return key

    def scoring_part(self, key: str, start: int) -> tuple[bytes | None, bytes | None]:
        """The scoring kept under ``key`` and the candidates of its part from ``start`` on
        (None where gone)."""
        scoring, part = self.r.hmget(key, "scoring", f"candidates:{int(start)}")
        return scoring, part

    def forget_scoring(self, key: str) -> None:
        self.r.delete(key)
