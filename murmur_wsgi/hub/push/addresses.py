"""Which addresses a push may reach: the public internet only.

``ipaddress``'s ``is_global`` is the base; the ranges below are refused
explicitly too, so the rule does not depend on the Python version's tables:
an IPv6 address that embeds or tunnels an IPv4 one (IPv4-mapped, NAT64,
Teredo, 6to4) is refused whatever it embeds.
"""
from __future__ import annotations

import ipaddress
import logging

logger = logging.getLogger(__name__)

_V4 = [ipaddress.ip_network(n) for n in (
    "0.0.0.0/8",          # "this" network
    "10.0.0.0/8",         # private
    "100.64.0.0/10",      # CGNAT (shared address space)
    "127.0.0.0/8",        # loopback
    "169.254.0.0/16",     # link-local, cloud metadata (169.254.169.254)
    "172.16.0.0/12",      # private
    "192.0.0.0/24",       # IETF protocol assignments
    "192.0.2.0/24",       # documentation (TEST-NET-1)
    "192.31.196.0/24",    # AS112
    "192.52.193.0/24",    # AMT
    "192.88.99.0/24",     # 6to4 relay anycast
    "192.168.0.0/16",     # private
    "192.175.48.0/24",    # AS112
    "198.18.0.0/15",      # benchmarking
    "198.51.100.0/24",    # documentation (TEST-NET-2)
    "203.0.113.0/24",     # documentation (TEST-NET-3)
    "224.0.0.0/4",        # multicast
    "240.0.0.0/4",        # reserved, broadcast
)]
_V6 = [ipaddress.ip_network(n) for n in (
    "::/128", "::1/128",  # unspecified, loopback
    "::ffff:0:0/96",      # IPv4-mapped
    "::/96",              # IPv4-compatible (deprecated)
    "64:ff9b::/96",       # NAT64
    "64:ff9b:1::/48",     # local-use NAT64
    "100::/64",           # discard
    "2001::/32",          # Teredo
    "2001:2::/48",        # benchmarking
    "2001:10::/28",       # ORCHID
    "2001:20::/28",       # ORCHIDv2
    "2001:db8::/32",      # documentation
    "2002::/16",          # 6to4
    "3fff::/20",          # documentation
    "5f00::/16",          # segment routing
    "fc00::/7",           # ULA
    "fe80::/10",          # link-local
    "fec0::/10",          # site-local (deprecated)
    "ff00::/8",           # multicast
)]


def is_public(ip) -> bool:
    """True when ``ip`` (an ipaddress object) is on the public internet."""
    if ip.version == 6 and ip.scope_id:
        return False
    blocked = _V4 if ip.version == 4 else _V6
    if any(ip in net for net in blocked):
        return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_private
                                 or ip.is_loopback or ip.is_link_local
                                 or ip.is_unspecified)


def reachable(ip, allow: list) -> bool:
    """Public, or in one of the test-only ``push.allow_networks``."""
    return is_public(ip) or any(ip.version == net.version and ip in net for net in allow)


def parse(text: str):
    """An ipaddress object of ``text`` (zone ids kept), or None when it is not an address."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
