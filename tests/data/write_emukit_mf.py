"""Emukit's linear multi-fidelity model (GPy underneath) at fixed hyperparameters, for
tests/worker/fidelity/test_model.py: run in an environment with ``emukit`` and ``GPy``
installed (``pip install emukit GPy``), ``python tests/data/write_emukit_mf.py >
tests/data/emukit_mf.json``. Two and three levels, designs not nested; the latent predictive
mean and variance (``predict_noiseless``) at every level. GPy adds 1e-8 to the covariance's
diagonal (its exact inference's jitter), written out as ``diagonal_jitter``."""

import json

import GPy
import numpy as np
from emukit.multi_fidelity.kernels import LinearMultiFidelityKernel
from emukit.multi_fidelity.models import GPyLinearMultiFidelityModel

cases = []
rng = np.random.default_rng(3)
for levels, per_level in ((2, (9, 5)), (3, (8, 5, 3))):
    d = 2
    u = rng.random((sum(per_level), d))
    t = np.repeat(np.arange(levels), per_level)
    z = rng.standard_normal(len(u))
    ell = rng.uniform(0.2, 0.8, (levels, d))
    v = np.r_[1.0, rng.uniform(0.1, 0.5, levels - 1)]
    rho = rng.uniform(0.5, 1.5, levels - 1)
    noise = rng.uniform(1e-3, 1e-2, levels)
    kernels = [GPy.kern.RBF(d, variance=v[k], lengthscale=ell[k], ARD=True) for k in range(levels)]
    kernel = LinearMultiFidelityKernel(kernels)
    kernel.scaling_param[:] = rho
    model = GPyLinearMultiFidelityModel(np.c_[u, t], z[:, None], kernel, n_fidelities=levels)
    for k in range(levels):
        name = "Gaussian_noise" if k == 0 else f"Gaussian_noise_{k}"
        getattr(model.likelihood, name).variance = noise[k]
    xs = rng.random((6, d))
    predictions = []
    for level in range(levels):
        mean, var = model.predict_noiseless(np.c_[xs, np.full(len(xs), level)])
        predictions.append({"level": level, "mean": mean[:, 0].tolist(), "var": var[:, 0].tolist()})
    cases.append(
        {
            "u": u.tolist(),
            "t": t.tolist(),
            "z": z.tolist(),
            "lengthscales": ell.tolist(),
            "variances": v.tolist(),
            "rho": rho.tolist(),
            "noise": noise.tolist(),
            "xs": xs.tolist(),
            "predictions": predictions,
        }
    )
print(json.dumps({"diagonal_jitter": 1e-8, "cases": cases}, indent=1))
