"""Free loopback ports for the servers the tests start (redis-servers, gunicorn, doors).

A port is handed out before its server listens on it, so two starts must never be handed
the same one, and nothing else may take it meanwhile:

- a process never hands out a port twice (the kernel gives a port closed a moment ago to
  the next ``bind(0)``, and servers started at once on threads of their own would share it);
- each pytest-xdist worker draws from a block of its own (``PYTEST_XDIST_WORKER``), so two
  workers of one run never draw the same port; two runs at once (``make test``'s timed
  tests that wait, beside the others) are given ranges apart (``MURMUR_TEST_PORTS``,
  ``LOW-HIGH`` within 10000–19999), the run's blocks shared out of its own;
- the blocks lie in 10000–19999, below the kernel's ephemeral range (Linux: 32768 and up),
  so no outgoing connection of the machine takes a port between its draw and its listen;
  a Redis Cluster node's bus port (port + 10000) lies in 20000–29999, where nothing else is
  drawn.

A port someone listens on already is passed over; if the machine's ephemeral range starts
below 30000, or a block runs out, ports come from ``bind(0)`` as before, still never twice.
"""
from __future__ import annotations

import os
import random
import socket
import threading

LOW, HIGH = 10000, 20000        # the ports drawn; their buses: + BUS, below 30000
BUS = 10000
_HANDED: set[int] = set()
_HANDING = threading.Lock()
_DRAW = random.SystemRandom()      # not the tests' seeded ``random``


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _run_range() -> tuple[int, int]:
    """The run's ports: ``MURMUR_TEST_PORTS`` (``LOW-HIGH``) when it lies within
    ``LOW``–``HIGH``, else all of them."""
    low, _, high = os.environ.get("MURMUR_TEST_PORTS", "").partition("-")
    if low.isdigit() and high.isdigit() and LOW <= int(low) < int(high) <= HIGH:
        return int(low), int(high)
    return LOW, HIGH


def _block() -> range:
    """This process's ports: its xdist worker's share of the run's, or all of them;
    empty where the ephemeral range reaches below the buses."""
    if _ephemeral_low() < HIGH + BUS:
        return range(0)
    low, high = _run_range()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")
    if not (worker.isdigit() and count.isdigit() and int(worker) < int(count)):
        return range(low, high)
    size = (high - low) // int(count)
    return range(low + int(worker) * size, low + (int(worker) + 1) * size)


_BLOCK = _block()


def _bindable(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                       socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                       socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_port(host: str = "127.0.0.1", also: int = 0) -> int:
    """A port of ``host`` nobody listens on now and this process never handed out before;
    with ``also``, one whose port + ``also`` is the same (reserved with it)."""
    for _ in range(len(_BLOCK) * 2):            # random draws; then the kernel's
        port = _DRAW.choice(_BLOCK)
        if _take(port, also, host):
            return port
    while True:
        port = _kernel_port(host)
        if port + also <= 65535 and _take(port, also, host):
            return port


def _take(port: int, also: int, host: str) -> bool:
    ports = {port, port + also}
    with _HANDING:
        if ports & _HANDED or not all(_bindable(each, host) for each in ports):
            return False
        _HANDED.update(ports)
    return True
