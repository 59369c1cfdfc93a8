"""Made-up benchmark records for the resume tests."""

import numpy as np

from fbgp_al.clients.reproduction.runs import RunSpec, label_rng, setup_for
from fbgp_al.clients.simulators import get_simulator


def run_records(spec: RunSpec, labels: int, **fields) -> list[dict]:
    """Records of ``spec``'s run up to ``labels`` labels, labeled as the bench labels (its
    initial design, then one made-up point per record with the run's label noise); ``fields``
    are added to every record."""
    sim = get_simulator(spec.simulator)
    setup = setup_for(spec)
    rng = label_rng(setup.seed, spec.acquisition)
    base = {
        "simulator": spec.simulator,
        "acquisition": spec.acquisition,
        "run": spec.run,
        "seed": setup.seed,
        "nlml": 1.0,
        "rmse": 1.0,
        **fields,
    }
    records = [
        {**base, "n_labeled": 3, "x": setup.initial_x.tolist(), "y": setup.initial_y.tolist()}
    ]
    for n in range(4, labels + 1):
        x = np.array([[n / 10.0]])
        records.append({**base, "n_labeled": n, "x": x.tolist(), "y": sim.sample(x, rng).tolist()})
    return records
