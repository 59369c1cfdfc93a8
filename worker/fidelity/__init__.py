"""Multi-fidelity campaigns' math: the autoregressive multi-fidelity GP, fully Bayesian
(:mod:`.model`), and the choice of a run's point and level (:mod:`.acquisition`)."""
