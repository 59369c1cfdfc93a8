"""How long a job's result lives (:mod:`service.job_results`), on a real Redis: a finished job
that was read has its record and its result expire within :data:`READ_TTL` seconds; a failed
job keeps its failure as RQ keeps it, and a job that is not there stays not there."""

from rq.results import Result

from fbgp_al.service.job_results import READ_TTL, forget


def test_a_read_result_expires_and_a_failure_is_kept(bare_store):
    r = bare_store.r
    r.hset("rq:job:done", mapping={"status": "finished"})
    r.xadd(Result.get_key("done"), {"type": "1"})
    r.hset("rq:job:broke", mapping={"status": "failed"})
    r.xadd(Result.get_key("broke"), {"type": "2"})
    forget(r, ["done", "broke", "never-was"])
    assert 0 < r.ttl("rq:job:done") <= READ_TTL
    assert 0 < r.ttl(Result.get_key("done")) <= READ_TTL
    assert r.ttl("rq:job:broke") == -1 and r.ttl(Result.get_key("broke")) == -1
    assert not r.exists("rq:job:never-was")
    r.delete("rq:job:done", "rq:job:broke", Result.get_key("done"), Result.get_key("broke"))
