"""The worker process (:mod:`service.jobs.process`): its size, and the bound on a work horse's
memory, which turns an allocation beyond it into a MemoryError rather than taking the machine."""

import subprocess
import sys
import textwrap

from fbgp_al.service.jobs.process import bound_memory, vm_size
from tests.conftest import ROOT


def test_the_size_is_this_processs_and_no_budget_sets_no_bound():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmSize:"))
    assert abs(vm_size() - int(line.split()[1]) * 1024) < 64 * 2**20
    assert bound_memory(0) is None


def test_an_allocation_beyond_the_bound_fails_and_one_within_it_does_not():
    code = textwrap.dedent("""
        from fbgp_al.service.jobs.process import bound_memory, vm_size
        limit = bound_memory(256)
        print("room", (limit - vm_size()) / 2**20)
        try:
            bytearray(1024 * 2**20)
        except MemoryError:
            print("refused")
        kept = bytearray(32 * 2**20)
        print("within", len(kept))
    """)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert 200 < float(lines[0].split()[1]) <= 256
    assert lines[1:] == ["refused", f"within {32 * 2**20}"]
