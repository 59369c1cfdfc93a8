"""How long a job's result lives: as long as its reader needs it. A result read once (a refit's
chain groups' draws by its merge, a scoring part's scores by its refit, a model call's answer
by the API) expires a few seconds after it is read; kept for their ``result_ttl`` (an hour for
the chain groups), such results held Redis's memory for nobody (90 MB of 117 MB after 15
minutes of refits)."""

from __future__ import annotations

from rq.job import JobStatus
from rq.results import Result

READ_TTL = 5  # seconds a read result (and its job's record) is kept
# seconds an unread result is kept: a refit's and its merge's (read by nobody but a person
# looking), a scoring part's (its refit waits for it a few seconds at most)
REFIT_RESULT_TTL = 60


def forget(connection, job_ids: list[str]) -> None:
    """The finished of these jobs' records and results expire in :data:`READ_TTL` seconds (a
    failed one keeps its failure for its ``failure_ttl``). They expire rather than go at once:
    a worker still ending a job may write its record again, which would then never expire."""
    with connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(f"rq:job:{job_id}", "status")
        statuses = pipe.execute()
        for job_id, status in zip(job_ids, statuses, strict=True):
            if status is not None and status.decode() == JobStatus.FINISHED.value:
                pipe.expire(f"rq:job:{job_id}", READ_TTL)
                pipe.expire(Result.get_key(job_id), READ_TTL)
        pipe.execute()
