"""What a request carries through the layers: ``CallContext`` and ``RpcCall``."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Credential:
    """Who a token speaks for: its name, its scopes, and whether it sees every task."""

    name: str
    scopes: frozenset
    sees_all: bool = False

    def reaches(self, scope: str) -> bool:
        return self.sees_all or scope in self.scopes


@dataclass
class CallContext:
    """Filled in by the HTTP tier: who calls, from where, with which extensions."""

    credential: Credential | None = None      # None: a public door, which sees every task
    origin: str | None = None                 # x-murmur-task-origin: peer | completion | None
    trust: str = "untrusted"                  # x-murmur-task-trust, recorded on the task
    extensions: frozenset = frozenset()       # URIs named by the request's A2A-Extensions
    last_event_id: str | None = None
    delegation_id: str | None = None          # a completion's x-murmur-delegation-id (step 9)

    @property
    def owner(self) -> str | None:
        """The owner a task this caller starts is recorded under (None: the session)."""
        cred = self.credential
        return None if cred is None or cred.sees_all else cred.name

    @property
    def caller(self) -> str | None:
        """The name of the credential calling (an agent's ``ctx.caller``); None: public door."""
        cred = self.credential
        return None if cred is None else cred.name

    def sees(self, task_owner: str | None) -> bool:
        """Apply "Who sees a task" to a task started under ``task_owner``."""
        cred = self.credential
        return cred is None or cred.sees_all or cred.name == task_owner


@dataclass
class RpcCall:
    """One JSON-RPC request, read by the RPC tier and handed to a handler."""

    id: Any
    method: str
    params: dict
    ctx: CallContext
    environ: dict
    used_extensions: list = field(default_factory=list)   # echoed in A2A-Extensions
