"""How a refit's candidates are split into parts scored on other workers."""

import numpy as np
import pytest

from worker.gp import SCORE_ALIGN
from worker.jobs.fanout import aligned_parts


@pytest.mark.parametrize("m,parts", [(1, 3), (700, 2), (5000, 3), (10_000, 2), (10_000, 7),
                                     (3 * SCORE_ALIGN, 3), (3 * SCORE_ALIGN + 1, 4)])  # fmt: skip
def test_parts_cover_every_candidate_once_and_start_at_the_alignment(m, parts):
    pieces = aligned_parts(m, parts)
    assert np.array_equal(np.concatenate(pieces), np.arange(m))
    assert 1 <= len(pieces) <= parts and all(len(p) for p in pieces)
    assert all(p[0] % SCORE_ALIGN == 0 for p in pieces)
    if m >= parts * SCORE_ALIGN:  # room for every part: about equal (whole blocks, the last cut)
        sizes = [len(p) for p in pieces]
        assert len(pieces) == parts and max(sizes) - min(sizes) < 2 * SCORE_ALIGN
