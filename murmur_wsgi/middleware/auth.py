"""Steps 2 and 11: the bearer token, then the method's scope."""
from __future__ import annotations

import hmac
import logging
import secrets

from murmur_wsgi.context import CallContext, Credential, RpcCall
from murmur_wsgi.errors import InsufficientScope, InvalidToken, Unauthenticated
from murmur_wsgi.manifest import DOOR_SCOPES

logger = logging.getLogger(__name__)

# Methods every valid token reaches: no scope is asked of them.
UNSCOPED = frozenset({"GetExtendedAgentCard", "CreateTaskPushNotificationConfig",
                      "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                      "DeleteTaskPushNotificationConfig"})


class TokenTable:
    """The tokens minted at launch: the operator's and one per declared credential.

    Tokens are compared in constant time against every minted token, so the
    time of a refusal says nothing about how close a guess came.
    """

    def __init__(self, authentication: dict | None, realm: str):
        self.enabled = authentication is not None
        self.realm = f'Bearer realm="{realm}"'
        self._entries: list[tuple[bytes, Credential]] = []
        self.tokens: dict[str, str] = {}          # credential name -> token, for the record
        if not self.enabled:
            return
        self._mint("operator", frozenset(DOOR_SCOPES), sees_all=True)
        for name, block in authentication["credentials"].items():
            self._mint(name, frozenset(block["scopes"]))

    def _mint(self, name: str, scopes: frozenset, sees_all: bool = False) -> None:
        token = secrets.token_urlsafe(32)
        self.tokens[name] = token
        self._entries.append((token.encode(), Credential(name, scopes, sees_all)))

    def lookup(self, token: str) -> Credential | None:
        """Return the credential a token was minted for, or None."""
        presented = token.encode("utf-8", "surrogateescape")
        found = None
        for minted, credential in self._entries:
            if hmac.compare_digest(minted, presented):
                found = credential
        return found


def check_token(environ: dict, ctx: CallContext, table: TokenTable) -> None:
    """Step 2: refuse a request without a token this session minted."""
    if not table.enabled:
        return                                      # a public door ignores Authorization
    header = environ.get("HTTP_AUTHORIZATION")
    if header is None:
        raise Unauthenticated(challenge=table.realm)
    scheme, _, token = header.partition(" ")
    # NOTE: servers join repeated header lines with ","; a minted token has none.
    if scheme.lower() != "bearer" or not token or "," in header:
        raise InvalidToken(challenge=f'{table.realm}, error="invalid_token"')
    credential = table.lookup(token)
    if credential is None:
        raise InvalidToken(challenge=f'{table.realm}, error="invalid_token"')
    ctx.credential = credential


def check_scope(call: RpcCall, table: TokenTable, scope: str | None = None) -> None:
    """Step 11: refuse a valid token whose credential lacks the method's scope."""
    credential = call.ctx.credential
    scope = scope or call.method
    if credential is None or scope in UNSCOPED or credential.reaches(scope):
        return
    raise InsufficientScope(credential.name, scope, table.realm)
