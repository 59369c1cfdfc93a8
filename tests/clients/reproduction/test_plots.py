"""Plots render to PNG from a small results file."""

import numpy as np
import pytest
from matplotlib.image import imread

from fbgp_al.clients.reproduction.plots import plot_learning_curves, plot_run, plot_simulator
from fbgp_al.clients.reproduction.results import append_record, read_results

PNG = b"\x89PNG\r\n\x1a\n"


def _results(path):
    rng = np.random.default_rng(0)
    for sim, d in (("gramacy1d", 1), ("branin", 2), ("hartmann6", 6)):
        for acq in ("alm", "qb-mgp"):
            for run in range(2):
                for step in range(5):
                    x = rng.random((3 if step == 0 else 1, d)).tolist()
                    append_record(
                        path,
                        {
                            "simulator": sim,
                            "acquisition": acq,
                            "run": run,
                            "n_labeled": 3 + step,
                            "nlml": float(rng.normal()),
                            "rmse": float(rng.random()),
                            "x": x,
                            "y": rng.normal(size=len(x)).tolist(),
                        },
                    )
    return read_results(path)


def _image(path):
    assert path.read_bytes()[:8] == PNG
    return imread(path)


def test_learning_curves(tmp_path):
    records = _results(tmp_path / "r.jsonl")
    out = plot_learning_curves(records, tmp_path / "plots" / "curves.png")
    image = _image(out)
    # 3 simulators x 2 metrics at 3.6 x 3.0 inches, 110 dpi
    assert image.shape[:2] == (660, 1188)
    assert image[..., :3].std() > 0.05  # not a blank canvas
    with pytest.raises(ValueError, match="no results"):
        plot_learning_curves([], tmp_path / "empty.png")


def test_simulators_and_runs(tmp_path):
    records = _results(tmp_path / "r.jsonl")
    for name in ("gramacy1d", "higdon", "motorcycle", "gramacy2d", "branin"):
        image = _image(plot_simulator(name, tmp_path / f"{name}.png"))
        assert image.shape[:2] == (495, 660)
    lower = np.array([-5.0, 0.0])
    span = np.array([15.0, 15.0])
    X = lower + np.random.default_rng(1).random((8, 2)) * span
    _image(plot_simulator("branin", tmp_path / "branin-points.png", X))
    _image(plot_run(records, "gramacy1d", "qb-mgp", 1, tmp_path / "run.png"))
    _image(plot_run(records, "branin", "alm", 0, tmp_path / "run2.png"))
    with pytest.raises(ValueError, match="only 1-D and 2-D"):
        plot_simulator("hartmann6", tmp_path / "h.png")
