"""The ``murmur-wsgi`` command line: serve (and, with the client, the operator's commands)."""
from __future__ import annotations

import argparse
import logging
import os
import socket
import sys

from murmur_wsgi.manifest import ManifestError, load_manifest_file

logger = logging.getLogger(__name__)


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _listen(manifest, override: str | None) -> str:
    if override:
        host, sep, port = override.rpartition(":")
        if not sep or not port.isdigit():
            raise ManifestError(f"--listen: '{override}' is not HOST:PORT")
        return override
    host = manifest.network["host"]
    port = manifest.network["internal_port"]
    return f"{host}:{port if port else _free_port(host)}"


def serve(args) -> int:
    """Validate the manifest, then run gunicorn -k gevent on it (or Werkzeug with --dev)."""
    try:
        manifest = load_manifest_file(args.config)
        listen = _listen(manifest, args.listen)
    except ManifestError as ex:
        print(f"murmur-wsgi: {ex}", file=sys.stderr)
        return 2
    os.environ["MURMUR_WSGI_CONFIG"] = os.path.abspath(args.config)
    os.environ["MURMUR_WSGI_LISTEN"] = listen
    if args.dev:
        from werkzeug.serving import run_simple

        from murmur_wsgi.app import create_app
        host, _, port = listen.rpartition(":")
        run_simple(host.strip("[]"), int(port), create_app(manifest, listen=listen),
                   threaded=True)
        return 0
    conf = args.gunicorn_conf
    if conf is None:
        conf = "conf/gunicorn.conf.py" if os.path.exists("conf/gunicorn.conf.py") else \
            "python:murmur_wsgi.gunicorn_conf"
    argv = [sys.executable, "-m", "gunicorn", "-c", conf, "-b", listen, "murmur_wsgi.wsgi:app"]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return


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
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
