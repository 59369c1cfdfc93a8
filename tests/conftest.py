import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread_and_seeded():
    """Every test starts seeded and on one thread (the workers run that way)."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
