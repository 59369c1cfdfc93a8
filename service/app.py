"""The API's old address, kept for ``uvicorn service.app:app`` and ``from service.app import
app``: the app is assembled in :mod:`service.main`."""

from fbgp_al.service.main import app

__all__ = ["app"]
