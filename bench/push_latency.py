"""Push delivery latency on loopback: from a state change to the receiver, p50/p99.

A hub with push on (the memory store, in this process, its dispatcher's
threads) runs ``-n`` blocking SendMessage calls of the demo agent one after the
other (the next once the last one's three notifications arrived), each with a
config pointing at a local HTTPS receiver (a certificate made here,
``push.allow_networks: [127.0.0.0/8]``: the project's test-only switch). The
latency of one notification is the receiver's clock when the body arrived
minus the status timestamp the body carries (the moment of the state change,
millisecond precision).

    python bench/push_latency.py [-n 100]

The memory store only; bench/hub_replicas.py measures the same on Redis with two
replicas.
"""
from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hub.conftest import HubClient  # noqa: E402
from murmur_wsgi.hub import create_hub  # noqa: E402
from tests.hub.push_util import Receiver, make_cert, push_config  # noqa: E402


def stamp(body: dict) -> float:
    status = body["task"]["status"] if "task" in body else body["statusUpdate"]["status"]
    return datetime.datetime.fromisoformat(status["timestamp"].replace("Z", "+00:00")) \
        .timestamp()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100, help="runs (3 notifications each)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = make_cert(Path(tmp))
        receiver = Receiver(cert, key)
        receiver.cert_file = cert
        config = push_config(receiver)
        config["limits"] = {**config["limits"], "rate_per_minute": 100_000}   # -n over 120
        hub = create_hub(config)
        try:
            rpc = HubClient(hub)
            for i in range(args.n):
                rpc.send(f"run {i}", configuration={"taskPushNotificationConfig": {
                    "url": receiver.url()}})
                receiver.wait_for(3 * (i + 1), timeout=60)     # one run at a time
        finally:
            hub.close(drain_timeout=5)
            receiver.close()
    latencies = sorted((r.at - stamp(r.json)) * 1000 for r in receiver.requests)
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(f"{len(latencies)} notifications: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
          f"max {latencies[-1]:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
