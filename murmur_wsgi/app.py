"""``create_app()``: the session, its agent, its layers, and the WSGI callable."""
from __future__ import annotations

import logging

from murmur_wsgi.card import CardCache
from murmur_wsgi.dispatch import dispatch
from murmur_wsgi.manifest import Manifest, load_manifest, load_manifest_file
from murmur_wsgi.metrics import Metrics
from murmur_wsgi.middleware.auth import TokenTable
from murmur_wsgi.session.core import Session

logger = logging.getLogger(__name__)

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class Door:
    """The door as a WSGI application. Holds no module globals: embed as many as you like."""

    def __init__(self, manifest: Manifest, agent=None, *, listen: str | None = None):
        self.manifest = manifest
        self.session = Session(manifest)
        self.tokens = TokenTable(manifest.authentication, manifest.name)
        self.cards = CardCache(manifest, self.session.id)
        self.metrics = Metrics(log_requests=False)
        self.files_plane = None
        self.listen = listen
        self.agent = agent
        public_url = manifest.network.get("public_url")
        self._base_url = public_url.rstrip("/") if public_url else None
        if self._base_url is None and listen:
            host, _, port = listen.rpartition(":")
            host = "localhost" if host in LOOPBACK else host
            self._base_url = f"http://{host}:{port}"

    def base_url(self, environ: dict) -> str:
        """The card's interface URL: public_url, the listener, or the request's own address."""
        if self._base_url is not None:
            return self._base_url
        host = environ.get("HTTP_HOST") or (
            f"{environ.get('SERVER_NAME', 'localhost')}:{environ.get('SERVER_PORT', '80')}")
        scheme = environ.get("wsgi.url_scheme", "http")
        return f"{scheme}://{host}{environ.get('SCRIPT_NAME', '').rstrip('/')}"

    def __call__(self, environ, start_response):
        return dispatch(self, environ, start_response)

    def close(self) -> None:
        """Close the session: answer held requests, end streams, kill background work."""
        self.session.closing = True


def create_app(manifest, agent=None, *, listen: str | None = None) -> Door:
    """Build a door from a Manifest, a mapping, or a path to ``murmur.yaml``."""
    if isinstance(manifest, str):
        manifest = load_manifest_file(manifest)
    else:
        manifest = load_manifest(manifest)
    return Door(manifest, agent, listen=listen)
