"""The hub's agent cards: one per published agent, its URL from ``public_url`` and
``mount_path`` only (never from a request); an internationalized host in its ASCII form,
so that the card's URL is a URL (RFC 3986)."""
from __future__ import annotations

import logging

from murmur_wsgi.wire.encode import compact_utf8

logger = logging.getLogger(__name__)

PREFIX = "/a2a/v1/agents/"
CARD_SUFFIX = "/.well-known/agent-card.json"
MODES = ["text/plain", "application/json"]
SECURITY_SCHEMES = {
    "apiKey": {"apiKeySecurityScheme": {
        "description": "An API key of the tenant, as X-API-Key", "location": "header",
        "name": "X-API-Key"}},
    "bearer": {"httpAuthSecurityScheme": {
        "description": "A JWT naming the tenant in X-Tenant-ID", "scheme": "Bearer",
        "bearerFormat": "JWT"}},
}
SECURITY_REQUIREMENTS = [{"schemes": {"apiKey": {"list": []}}},
                         {"schemes": {"bearer": {"list": []}}}]


def card_skills(tenant: str, agent: str, skills: list) -> list:
    """The card's skills: entries with id, name and description (strings), others dropped."""
    out = []
    for i, skill in enumerate(skills):
        if not all(isinstance(skill.get(key), str) and skill.get(key)
                   for key in ("id", "name", "description")):
            logger.warning("tenants.%s.agents.%s.skills[%d] lacks id, name or description: "
                           "left out of the card", tenant, agent, i)
            continue
        entry = {"id": skill["id"], "name": skill["name"], "description": skill["description"]}
        tags = skill.get("tags")
        entry["tags"] = [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []
        for key in ("examples", "inputModes", "outputModes"):
            value = skill.get(key)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                entry[key] = value
        out.append(entry)
    return out


def build_card(base_url: str, tenant: str, name: str, spec: dict, push: bool) -> dict:
    """The card; ``base_url`` is ``public_url`` and ``mount_path`` joined."""
    return {
        "name": name,
        "description": spec["description"],
        "supportedInterfaces": [{"url": f"{base_url}{PREFIX}{name}",
                                 "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "version": spec["version"],
        "capabilities": {"streaming": True, "pushNotifications": push},
        "securitySchemes": SECURITY_SCHEMES,
        "securityRequirements": SECURITY_REQUIREMENTS,
        "defaultInputModes": MODES,
        "defaultOutputModes": MODES,
        "skills": card_skills(tenant, name, spec["skills"]),
    }


def card_bodies(config) -> dict[tuple[str, str], bytes]:
    """Every published agent's card, serialized once: ``(tenant, agent) -> bytes``."""
    if not config.public_url:
        return {}
    push = bool(config.push.get("enabled"))
    base_url = config.announced_url + config.mount_path
    out = {}
    for tenant, block in config.tenants.items():
        for name, spec in block["agents"].items():
            if spec["publish"]:
                out[(tenant, name)] = compact_utf8(
                    build_card(base_url, tenant, name, spec, push)).encode()
    return out
