"""The service's endpoints, module-level functions listed as :class:`Route` s: a pipeline's endpoints in their
route group's module (``embeddings``, ``classify``, ``rerank``, ``tag``, ``answer``, ``pretraining``,
``attention``: each one's ``ROUTES``), gathered in ``pipelines.PIPELINE_ROUTES``; text-embeddings-inference's
others in ``tei``; a task family's own pipeline's (``Family.run``) from ``families``; one every app has in
``site``. :func:`add_routes` puts them on an app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from bertkit.serve.routes.families import family_routes
from bertkit.serve.routes.pipelines import PIPELINE_ROUTES, available
from bertkit.serve.routes.site import PAGE_ROUTE, STATIC, STATUS_ROUTES
from bertkit.serve.routes.tei import ROOT_ROUTE, TEI_ROUTES

if TYPE_CHECKING:  # an export folder is served without torch
    from bertkit.inference import Loaded

__all__ = ["add_routes"]


def add_routes(app: FastAPI, loaded: Loaded) -> None:
    """Status routes, the endpoint of each pipeline ``loaded`` supports (the others do not exist: 404), then
    the web page and its static files."""
    for route in STATUS_ROUTES:
        route.add_to(app)
    for table in (PIPELINE_ROUTES, TEI_ROUTES):
        for pipeline, routes in table.items():
            if available(loaded, pipeline):
                for route in routes:
                    route.add_to(app)
    for route in family_routes(loaded, set(PIPELINE_ROUTES)):
        route.add_to(app)
    ROOT_ROUTE.add_to(app)
    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
        PAGE_ROUTE.add_to(app)
