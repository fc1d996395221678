"""The agent cards: the public card, and the extended card of an authenticated door."""
from __future__ import annotations

import hashlib
import logging

from murmur_wsgi.uris import CAPSULE_URI, DOOR_URI, STREAM_URI
from murmur_wsgi.wire.encode import compact_ascii

logger = logging.getLogger(__name__)

DOOR_DESCRIPTION = (
    "Every JSON-RPC method this door answers, A2A methods and murmur's own alike, the murmur "
    "ones named murmur.<Method>; whether it accepts tasks from peer capsules; and the "
    "forgetSession field a message's metadata may carry under this URI.")
CAPSULE_DESCRIPTION = (
    "The session answering this address and what the capsule may do. Served only to "
    "authenticated callers once the door authenticates.")
STREAM_DESCRIPTION = (
    "The murmur frames this capsule writes in addition to the A2A v1.0 events: sent on "
    "SendStreamingMessage and SubscribeToTask when the request's A2A-Extensions header names "
    "this URI, and always on murmur.WatchSession. Each is carried in a StreamResponse under "
    "metadata keyed by this URI.")
BEARER_DESCRIPTION = ("A token this capsule's runtime mints at launch and accepts until the "
                      "session ends.")

HTTP_FRAMES = ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact",
               "gap", "lagged", "connection-ack", "capsule-closed"]
PROCESS_FRAMES = ["text", "thinking", "tool-call-started", "tool-call-progress", "artifact",
                  "quota", "suggested-prompt", "gap", "lagged", "connection-ack",
                  "capsule-closed"]
TASK_METHODS = ("SendMessage", "SendStreamingMessage")


def door_methods(manifest) -> list[str]:
    """Return params.methods: what POST / answers with anything but -32601."""
    starts = manifest.acceptance != "none"
    methods = []
    if starts:
        methods += ["SendMessage", "SendStreamingMessage"]
    methods += ["murmur.WatchSession", "GetTask", "ListTasks", "CancelTask"]
    if starts:
        methods.append("SubscribeToTask")
    methods.append("murmur.StopSession")
    if manifest.authentication:
        methods.append("GetExtendedAgentCard")
    return methods


def _extension(uri: str, description: str, params: dict) -> dict:
    return {"uri": uri, "description": description, "required": False, "params": params}


def build_card(manifest, session_id: str, url: str, *, extended: bool = False) -> dict:
    """Build the card a caller reads: public, or (authenticated door) extended."""
    auth = manifest.authentication is not None
    methods = door_methods(manifest)
    starts = manifest.acceptance != "none"
    door = _extension(DOOR_URI, DOOR_DESCRIPTION,
                      {"methods": methods, "peerTasks": manifest.peer_accept})
    capsule = _extension(CAPSULE_URI, CAPSULE_DESCRIPTION, {
        "sessionId": session_id,
        "tools": list(manifest.tools),
        "shell": bool(manifest.capabilities["shell"]["allow"]),
        "network": bool(manifest.capabilities["network"]["allow"]),
        "planes": ["files"] if manifest.exports.get("files") else [],
    })
    frames = PROCESS_FRAMES if manifest.transport == "process" else HTTP_FRAMES
    stream = _extension(STREAM_URI, STREAM_DESCRIPTION, {"frames": list(frames)})
    extensions = [door, capsule, stream] if (extended or not auth) else [door, stream]
    skill = {"id": "task", "name": "Run a task",
             "description": "Runs one task given as a text message and reports its outcome.",
             "tags": ["task"]}
    if auth:
        skill["securityRequirements"] = [{"schemes": {"bearer": {"list": [m]}}}
                                         for m in TASK_METHODS if m in methods]
    return {
        "name": manifest.name,
        "description": f"Murmur capsule {manifest.name} {manifest.version}",
        "version": manifest.version,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC",
                                 "protocolVersion": "1.0"}],
        "capabilities": {"streaming": "SendStreamingMessage" in methods,
                         "pushNotifications": False,
                         "extendedAgentCard": auth,
                         "extensions": extensions},
        "securitySchemes": ({"bearer": {"httpAuthSecurityScheme": {
            "scheme": "Bearer", "description": BEARER_DESCRIPTION}}} if auth else {}),
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}] if auth else [],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [skill] if starts else [],
    }


class CardCache:
    """Serialized cards per base URL, with their ETag: built once, served many times."""

    def __init__(self, manifest, session_id: str):
        self._manifest = manifest
        self._session_id = session_id
        self._cache: dict[tuple[str, bool], tuple[bytes, str, dict]] = {}

    def get(self, url: str, *, extended: bool = False) -> tuple[bytes, str, dict]:
        """Return (body bytes, etag, card dict) for the card at ``url``."""
        key = (url, extended)
        hit = self._cache.get(key)
        if hit is None:
            card = build_card(self._manifest, self._session_id, url, extended=extended)
            body = compact_ascii(card).encode()
            etag = hashlib.sha256(body).hexdigest()[:32]
            if len(self._cache) < 64:          # bounded: one per Host a caller names
                self._cache[key] = hit = (body, etag, card)
            else:
                hit = (body, etag, card)
        return hit
