"""Credentials: an API key (X-API-Key) or a Bearer JWT with X-Tenant-ID; the tenant they give.

A request presents one credential: one that carries both ``X-API-Key`` and
``Authorization`` is refused (401, ``BOTH``), whether either would verify, so
that no request is served as a tenant other than the one each header names.

A key is never stored: hub.yaml lists SHA-256 hex digests, and a presented
key's digest is compared with ``hmac.compare_digest``. A JWT is verified with
PyJWT against the configured key and algorithms only (``alg: none`` and any
other algorithm are refused), with its issuer, audience and expiry. Each
header is read without HTTP's whitespace at its ends (``OWS``), as a server
may pass it on. Tokens are never logged.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import secrets

from murmur_wsgi.hub.errors import HubRefusal, NoTenant
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)

KEY_PREFIX = "mhk_"
_DECOY = "0" * 64
BOTH = "send one credential: X-API-Key or Authorization, not both"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def mint_key() -> tuple[str, str]:
    """A new API key ``mhk_<random>`` and its digest (what hub.yaml records)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, digest(key)


class Credentials:
    """Who a request is: its tenant, from an API key or a JWT (never from the request)."""

    def __init__(self, config):
        self._keys: dict[str, str] = {}                  # digest -> tenant
        for tenant, block in config.tenants.items():
            for known in block["api_keys"]:
                self._keys[known] = tenant
        self._tenants = frozenset(config.tenants)
        # Run before a key is looked up: hub/keys.py's watcher, which keeps the keys current.
        self.refresh = None
        block = (config.auth or {}).get("jwt")
        self._jwt = None
        if block:
            # PERF: PyJWT (and the cryptography it loads) only for a hub that verifies JWTs:
            # 55-100 ms of each process's start otherwise; imported here, at the hub's
            # creation, not at its first token.
            import jwt
            self._pyjwt = jwt
            key = block["secret"] or block["public_key"]
            algorithms = block["algorithms"] or (["HS256"] if block["secret"]
                                                 else ["RS256", "ES256"])
            self._jwt = (key, list(algorithms), block["issuer"], block["audience"],
                         block["leeway_secs"])

    def keys(self) -> dict[str, str]:
        """``{digest: tenant}``: the keys this hub accepts now."""
        return dict(self._keys)

    def replace_keys(self, keys: dict[str, str]) -> None:
        """Accept exactly ``keys`` from now on (the table is replaced whole)."""
        self._keys = dict(keys)

    def tenant_of(self, environ: dict) -> tuple[str, str]:
        """Return ``(tenant, subject)`` of the request's credential, or raise a HubRefusal (401)."""
        key = environ.get("HTTP_X_API_KEY")
        header = environ.get("HTTP_AUTHORIZATION")
        if key is not None and header is not None:
            raise HubRefusal(BOTH)
        if key is not None:
            if self.refresh is not None:
                self.refresh()
            return self._by_key(key.strip(OWS)), "api-key"
        header = header or ""
        scheme, _, token = header.partition(" ")
        token = token.strip(OWS)
        if scheme.lower() == "bearer" and token and self._jwt is not None:
            return self._by_jwt(token, environ)
        raise HubRefusal()

    def is_operator(self, environ: dict) -> bool:
        """A bearer JWT that verifies and says ``role: operator`` (no tenant needed)."""
        header = environ.get("HTTP_AUTHORIZATION", "")
        scheme, _, token = header.partition(" ")
        token = token.strip(OWS)
        if scheme.lower() != "bearer" or not token or self._jwt is None:
            return False
        try:
            claims = self._claims(token)
        except HubRefusal:
            return False
        return claims.get("role") == "operator"

    def _claims(self, token: str) -> dict:
        key, algorithms, issuer, audience, leeway = self._jwt
        options = {"require": ["exp"] + (["iss"] if issuer else []) + (["aud"] if audience
                                                                       else [])}
        pyjwt = self._pyjwt
        try:
            return pyjwt.decode(token, key, algorithms=algorithms, issuer=issuer,
                                audience=audience, leeway=leeway, options=options)
        except pyjwt.PyJWTError as ex:
            logger.info("a JWT was refused: %s", type(ex).__name__)
            raise HubRefusal() from None
        except Exception:  # noqa: BLE001 - a malformed key or token must stay a 401
            logger.info("a JWT could not be verified")
            raise HubRefusal() from None

    def _by_key(self, key: str) -> str:
        presented = digest(key)
        # NOTE: the lookup is by digest, which tells a caller nothing about the keys; the
        # comparison that decides is constant-time (against a decoy when none matched).
        tenant = self._keys.get(presented)
        known = presented if tenant is not None else _DECOY
        if not hmac.compare_digest(presented, known) or tenant is None:
            raise HubRefusal()
        return tenant

    def _by_jwt(self, token: str, environ: dict) -> tuple[str, str]:
        claims = self._claims(token)
        tenant = environ.get("HTTP_X_TENANT_ID", "").strip(OWS)
        if not tenant:
            raise NoTenant()
        if tenant not in self._tenants:
            raise HubRefusal()
        allowed = claims.get("tenants")
        operator = claims.get("role") == "operator"
        if not operator and not (isinstance(allowed, list) and tenant in allowed):
            raise HubRefusal()
        return tenant, str(claims.get("sub", ""))
