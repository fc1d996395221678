"""Steps 2 and 11: the bearer token, then the method's scope.

The tokens are minted here, once per launch: the operator's, with every
scope, and one per declared credential. They live in memory and in the
running record (``session/records.py``, mode 0600); no log line, error body
or ``repr`` carries one.
"""
from __future__ import annotations

import hmac
import logging
import re
import secrets

from murmur_wsgi.door.context import CallContext, Credential, RpcCall
from murmur_wsgi.errors import InsufficientScope, InvalidToken, Unauthenticated
from murmur_wsgi.door.manifest import DOOR_SCOPES
from murmur_wsgi.serving.ows import OWS

logger = logging.getLogger(__name__)

OPERATOR = "operator"
TOKEN_BYTES = 32
# Methods every valid token reaches: no scope is asked of them.
UNSCOPED = frozenset({"GetExtendedAgentCard", "CreateTaskPushNotificationConfig",
                      "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
                      "DeleteTaskPushNotificationConfig"})


# What an RFC 9110 quoted-string cannot hold, even escaped: every control character but
# HTAB (a line break, NUL, ESC, DEL), which servers refuse in a header value (gunicorn
# answers 500, Werkzeug raises).
_NOT_IN_QUOTED = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_SPACES = re.compile(r"[ \t]+")


def realm_challenge(name: str) -> str:
    """Return ``Bearer realm="<name>"``, the name as an RFC 7235 quoted-string."""
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    # NOTE: a header value must be latin-1 and hold no control character; a name's
    # character outside it, or a control character, is shown with '?'.
    quoted = _NOT_IN_QUOTED.sub("?", quoted.encode("latin-1", "replace").decode("latin-1"))
    return f'Bearer realm="{quoted}"'


def bearer_token(header: str) -> str | None:
    """Return the token an Authorization value presents as Bearer, or None.

    The scheme matches in any case; the token is returned as sent. A value
    with a comma is two header lines joined by the server (a minted token
    has none), and is refused.
    """
    if "," in header:
        return None
    # NOTE: the 1*SP after the scheme is space and tab too (serving/ows.py): split() would
    # also take a latin-1 no-break space or NEL (0xA0, 0x85).
    parts = _SPACES.split(header.strip(OWS), 1)
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1] or None


class TokenTable:
    """The tokens minted at launch: the operator's and one per declared credential.

    A presented token is compared in constant time against every minted
    token, so the time of a refusal says nothing about how close a guess came.
    """

    def __init__(self, authentication: dict | None, realm: str):
        self.enabled = authentication is not None
        self.realm = realm_challenge(realm)
        self._entries: list[tuple[bytes, Credential]] = []
        # credential name -> token, operator first: for the running record only.
        self.tokens: dict[str, str] = {}
        if not self.enabled:
            return
        self._mint(OPERATOR, frozenset(DOOR_SCOPES), sees_all=True)
        for name, block in authentication["credentials"].items():
            self._mint(name, frozenset(block["scopes"]))

    def __repr__(self) -> str:
        return f"<TokenTable credentials={list(self.tokens)}>"

    def _mint(self, name: str, scopes: frozenset, sees_all: bool = False) -> None:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        self.tokens[name] = token
        self._entries.append((token.encode("ascii"), Credential(name, scopes, sees_all)))

    def lookup(self, token: str) -> Credential | None:
        """Return the credential a token was minted for, or None."""
        presented = token.encode("utf-8", "surrogatepass")
        found = None
        for minted, credential in self._entries:
            if hmac.compare_digest(minted, presented):
                found = credential
        return found

    @property
    def invalid_challenge(self) -> str:
        return f'{self.realm}, error="invalid_token"'


def check_token(environ: dict, ctx: CallContext, table: TokenTable) -> None:
    """Step 2: refuse a request without a token this session minted."""
    if not table.enabled:
        return                                      # a public door ignores Authorization
    header = environ.get("HTTP_AUTHORIZATION")
    if header is None:
        raise Unauthenticated(challenge=table.realm)
    token = bearer_token(header)
    credential = table.lookup(token) if token is not None else None
    if credential is None:
        raise InvalidToken(challenge=table.invalid_challenge)
    ctx.credential = credential


def check_scope(call: RpcCall, table: TokenTable, scope: str | None = None) -> None:
    """Step 11: refuse a valid token whose credential lacks the method's scope."""
    credential = call.ctx.credential
    scope = scope or call.method
    if credential is None or scope in UNSCOPED or credential.reaches(scope):
        return
    raise InsufficientScope(credential.name, scope, table.realm)
