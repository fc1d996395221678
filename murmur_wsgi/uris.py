"""The extension URIs and the door's fixed names."""
from __future__ import annotations

DOOR_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-door-v1"
CAPSULE_URI = "https://docs.murmur.nexus/reference/agent-card/#murmur-capsule-v1"
STREAM_URI = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1"

CARD_PATH = "/.well-known/agent-card.json"
FILES_PLANE = "/resources/files"
PEER_PLANE = "/resources/peer"
