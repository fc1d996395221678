"""The ``murmur-wsgi`` command line: serve, token (and, with the client, the operator's commands)."""
from __future__ import annotations

import argparse
import sys

from murmur_wsgi.client import cli_commands as client_commands
from murmur_wsgi import running


def serve(args) -> int:
    """``murmur-wsgi serve``: the door (its modules imported only for it)."""
    from murmur_wsgi.door import cli as door_cli

    return door_cli.main(args)


def hub(args) -> int:
    """``murmur-wsgi hub``: validate hub.yaml, then serve it (or mint a key with ``key``)."""
    from murmur_wsgi.hub import cli as hub_cli

    return hub_cli.main(args)


class TokenError(Exception):
    """``murmur-wsgi token`` cannot print a token; ``str()`` is the one line to print."""


def find_token(session_id: str | None, credential: str | None) -> str:
    """The token ``credential`` (default: the operator's) of a running session's record."""
    if session_id is None:
        live = running.running_records()
        if not live:
            raise TokenError("no session is running: no record under "
                             f"{running.running_dir()}")
        if len(live) > 1:
            names = ", ".join(record["session_id"] for record in live)
            raise TokenError(f"{len(live)} sessions are running; name one with "
                             f"--session: {names}")
        record = live[0]
    else:
        record = running.find_record(session_id)
        if record is None:
            raise TokenError(f"no running session {session_id}")
    sid = record["session_id"]
    if "door_token" not in record:
        raise TokenError(f"{sid} has a public door: its capsule declares no "
                         "network.authentication, so it minted no token")
    credentials = record.get("credentials") or {}
    if credential in (None, "operator"):
        return record["door_token"]
    if credential not in credentials:
        names = ", ".join(["operator", *sorted(credentials)])
        raise TokenError(f"{sid} minted no credential '{credential}'; it has: {names}")
    return credentials[credential]


def token(args) -> int:
    """Print a running session's token and a newline, from its running record."""
    try:
        value = find_token(args.session, args.credential)
    except TokenError as ex:
        print(f"murmur-wsgi: {ex}", file=sys.stderr)
        return 2
    sys.stdout.write(value + "\n")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="murmur-wsgi",
                                     description="The A2A v1.0 door of an agent runtime.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("serve", help="serve a manifest under gunicorn -k gevent")
    p.add_argument("--config", default="conf/murmur.yaml", help="the manifest, murmur.yaml")
    p.add_argument("--listen", help="HOST:PORT (default: the manifest's network block)")
    p.add_argument("--dev", action="store_true", help="Werkzeug's threaded development server")
    p.add_argument("--gunicorn-conf", help="a gunicorn config file")
    p.set_defaults(func=serve)
    p = sub.add_parser("hub", help="serve a hub (hub.yaml) under gunicorn -k gevent; "
                                   "'hub key TENANT' mints an API key (--revoke, --list)")
    p.add_argument("action", nargs="?", choices=["key"], help="key: mint an API key")
    p.add_argument("tenant", nargs="?", help="the tenant a new key belongs to")
    p.add_argument("--revoke", metavar="DIGEST_OR_PREFIX",
                   help="key: revoke the tenant's key with this digest (8 digits or more)")
    p.add_argument("--list", action="store_true", help="key: list the tenant's key digests")
    p.add_argument("--config", default="conf/hub.yaml", help="the hub's hub.yaml")
    p.add_argument("--listen", help="HOST:PORT (default 127.0.0.1:41880)")
    p.add_argument("--public-url", help="the base URL the cards announce (default: "
                   "$MURMUR_HUB_PUBLIC_URL, else hub.yaml's public_url)")
    p.add_argument("--workers", type=int, default=1,
                   help="gunicorn workers (more than 1 needs store: redis://…)")
    p.add_argument("--dev", action="store_true", help="Werkzeug's threaded development server")
    p.add_argument("--gunicorn-conf", help="a gunicorn config file")
    p.set_defaults(func=hub)
    p = sub.add_parser("token", help="print a running session's door token")
    p.add_argument("--session", help="the session id (default: the only running session)")
    p.add_argument("--credential", help="a declared credential (default: operator)")
    p.set_defaults(func=token)
    # card, send, get, tasks/ps, watch, cancel, stop: the client's commands.
    client_commands.add_commands(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
