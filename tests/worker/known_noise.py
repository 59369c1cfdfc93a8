"""What the known-noise tests of the worker share: a 1-D campaign whose labels carry their noise
variance, and its labels as the store keeps them."""

SPEC = {
    "inputs": [{"name": "x", "lower": 0.0, "upper": 10.0}],
    "pool": {"type": "grid", "points_per_dim": 51},
    "pool_subsample": 51,
    "acquisition": "alm",
    "mcmc": {"chains": 2, "warmup": 30, "samples": 30, "thinning": 3},
    "seed": 2,
    "noise": {"type": "known", "nugget": True},
}


def labels(x, y, noise=None) -> list[dict]:
    """Labels of 1-D points ``x`` as the store keeps them, with ``noise`` variances if given."""
    return [
        {
            "x": [float(a)],
            "y": float(b),
            "index": None,
            "ticket": None,
            **({} if noise is None else {"noise": float(noise[i])}),
        }
        for i, (a, b) in enumerate(zip(x, y, strict=True))
    ]
