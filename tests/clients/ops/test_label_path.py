"""``fbgp-al label-path``'s bookkeeping (:mod:`clients.ops.label_path`): a frame's file to its
product module and its room (a layer's package one room; libraries, the HTTP plumbing and the
shared vocabulary none), and a trace summed up (modules in the order first entered, re-entries,
and the heartbeat beside a refit counted apart). The traced run itself is ``fbgp-al
label-path``'s."""

from clients.ops.label_path import ROOT, Trace, module_of, room_of, summary


def test_a_frames_file_is_its_product_module_and_its_room():
    assert module_of(str(ROOT / "service" / "loop.py")) == "service.loop"
    assert module_of(str(ROOT / "worker" / "jobs" / "__init__.py")) == "worker.jobs"
    assert module_of("/usr/lib/python3/json/__init__.py") is None  # a library's
    assert module_of(str(ROOT / "clients" / "ops" / "label_path.py")) is None  # the tracer's
    assert room_of(str(ROOT / "service" / "routes" / "labeling.py")) == "service.routes.labeling"
    assert room_of(str(ROOT / "service" / "store" / "labels.py")) == "service.store"
    assert room_of(str(ROOT / "service" / "keys.py")) == "service.store"
    assert room_of(str(ROOT / "worker" / "jobs" / "lease.py")) == "worker.jobs"
    assert room_of(str(ROOT / "service" / "middleware.py")) is None  # plumbing
    assert room_of(str(ROOT / "worker" / "spec" / "space.py")) is None  # the vocabulary


def test_a_trace_is_summed_up_with_the_heartbeat_apart():
    trace = Trace(entries=[(1, "<outside>", "service.routes.labeling"),
                           (1, "service.routes.labeling", "service.store"),
                           (2, "worker.jobs", "worker.jobs.lease"),
                           (2, "worker.jobs.lease", "service.store"),
                           (1, "service.store", "service.loop"),
                           (1, "service.loop", "service.store")],
                  math={"worker.gp", "worker.nuts"})  # fmt: skip
    out = summary(trace)
    assert out["modules"] == ["service.routes.labeling", "service.store", "service.loop"]
    assert out["entries"] == 4 and out["entered"]["service.store"] == 2
    assert out["reentered"] == ["service.store"] and out["math"] == ["worker.gp", "worker.nuts"]
    assert out["heartbeat"] == ["worker.jobs -> worker.jobs.lease",
                                "worker.jobs.lease -> service.store"]  # fmt: skip
    assert out["sequence"][0] == "<outside> -> service.routes.labeling"
