"""``murmur-wsgi hub``: serve hub.yaml under gunicorn -k gevent (or --dev); ``hub key``."""
from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
import tempfile
import time
from urllib.parse import urlsplit

from murmur_wsgi.hub.auth import mint_key
from murmur_wsgi.hub.config import CONFIG_ENV, ConfigError, load_config_file
from murmur_wsgi.hub.config_env import ENV_PREFIX
from murmur_wsgi.serving.ports import listen_refusal, port_number
from murmur_wsgi.hub.key_text import add_digest, remove_digest
from murmur_wsgi.hub.keys import REDIS_KEYS, REVOKED, redis_client, watch_keys

logger = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:41880"
TENANTS_ENV = ENV_PREFIX + "TENANTS"        # a whole tenants block, which wins over the file


def _listen(value: str | None) -> str:
    listen = value or DEFAULT_LISTEN
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(f"--listen: '{listen}' is not HOST:PORT")
    return listen


LOOPBACK = {"127.0.0.1", "localhost", "::1"}
PUBLIC_URL_ENV = "MURMUR_HUB_PUBLIC_URL"


def public_url_warning(public_url: str | None, listen: str) -> str | None:
    """One line when the cards' loopback URL names another port than the hub listens on."""
    if not public_url:
        return None
    parts = urlsplit(public_url)
    host, _, port = listen.rpartition(":")
    announced = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.hostname in LOOPBACK and host.strip("[]") in LOOPBACK and announced != port_number(port):
        return (f"public_url {public_url} names port {announced}, but the hub listens on "
                f"{listen}: its cards send clients elsewhere; give --public-url "
                f"http://{listen} (or set {PUBLIC_URL_ENV})")
    return None


def _flag_named(message: str, args) -> str:
    """A refusal of ``--public-url``'s value names the flag, not the variable it is passed
    to gunicorn's workers by (nor hub.yaml, where it is not)."""
    named = f"{PUBLIC_URL_ENV} (public_url):"
    if getattr(args, "public_url", None) and named in message:
        return "--public-url:" + message.split(named, 1)[1]
    return message


def main(args) -> int:
    if args.action == "key":
        return keys(args)
    # NOTE: agents and hooks are imported from the current directory, as gunicorn does.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    if getattr(args, "public_url", None):
        # The environment's setting wins over the file, in this process and in gunicorn's.
        os.environ[PUBLIC_URL_ENV] = args.public_url
    try:
        config = load_config_file(args.config)
        listen = _listen(args.listen)
        workers = getattr(args, "workers", 1) or 1
        if workers < 1 or (workers > 1 and not config.shared):
            raise ConfigError(f"--workers: {workers}: the memory store lives in one process; "
                              "more than 1 worker needs Redis: set MURMUR_HUB_REDIS_URL="
                              "redis://host:port/0 (or redis.url, or store: redis://…)")
        if args.dev:
            # NOTE: validated in full (agents and hooks imported) before anything listens.
            from murmur_wsgi.hub.app import Hub

            hub = Hub(config)
            watch_keys(hub, args.config)
        else:
            from murmur_wsgi.hub.app import load_agents
            from murmur_wsgi.hub.admission import Admission

            load_agents(config)
            Admission(config)
            _store_checked(config)
        refusal = listen_refusal(listen)
        if refusal:
            raise ConfigError(refusal)
    except ConfigError as ex:
        print(f"murmur-wsgi: {_flag_named(str(ex), args)}", file=sys.stderr)
        return 2
    warning = public_url_warning(config.public_url, listen)
    if warning:
        print(f"murmur-wsgi: warning: {warning}", file=sys.stderr)
    if args.dev:
        from murmur_wsgi import logs
        from murmur_wsgi.hub.dev_server import serve_dev

        logs.configure()
        host, _, port = listen.rpartition(":")
        return serve_dev(hub, host.strip("[]"), port_number(port))
    os.environ[CONFIG_ENV] = os.path.abspath(args.config)
    os.environ["MURMUR_WSGI_LISTEN"] = listen
    conf = args.gunicorn_conf or "python:murmur_wsgi.hub.gunicorn_conf"
    argv = [sys.executable, "-m", "gunicorn", "-c", conf, "-b", listen, "-w", str(workers),
            "murmur_wsgi.hub.wsgi:make_app()"]
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return 0  # pragma: no cover - execv does not return


def keys(args) -> int:
    """``hub key TENANT``: mint a key; ``--revoke DIGEST_OR_PREFIX``; ``--list``."""
    tenant = args.tenant
    if not tenant:
        print("murmur-wsgi: hub key needs a TENANT", file=sys.stderr)
        return 2
    listing = getattr(args, "list", False)
    try:
        with _changing(args.config, listing):
            config = load_config_file(args.config)
            if tenant not in config.tenants:
                raise ConfigError(f"{args.config}: tenants.{tenant}: no such tenant")
            if not listing and TENANTS_ENV in os.environ:
                # NOTE: the variable's tenants block wins over hub.yaml's whole, at the
                # start and at each re-read of the keys: a key minted into the file never
                # worked (and a file without tenants failed with a traceback).
                raise ConfigError(f"{TENANTS_ENV} is set: the hub reads its tenants and "
                                  f"their api_keys from it, not from {args.config}: put "
                                  "the key's digest (SHA-256 hex) there, or unset it to "
                                  "keep the keys in the file")
            redis = _connected(config)
            if listing:
                return list_keys(config, tenant, redis)
            if getattr(args, "revoke", None):
                return revoke(args, config, tenant, redis)
            return mint(args, tenant, redis)
    except ConfigError as ex:
        print(f"murmur-wsgi: {ex}", file=sys.stderr)
        return 2
    except OSError as ex:               # read, staged or replaced: one line, nothing changed
        print(f"murmur-wsgi: {args.config}: cannot be changed: {ex.strerror or ex}",
              file=sys.stderr)
        return 2


LOCK_WAIT_SECS = 10.0


@contextlib.contextmanager
def _changing(path: str, reading: bool = False):
    """Hold hub.yaml's folder locked (``flock``) while a ``hub key`` command reads and
    replaces the file: two mints at once each read the file, and the second's replace
    lost the first's key, printed all the same. The folder, not the file: a replace makes
    a new file, which a waiter would lock apart; the real file's folder (a link to it is
    followed). Waits ``LOCK_WAIT_SECS`` at most. ``reading`` (``--list``) takes no lock.
    A filesystem without ``flock`` on a folder (NFS emulates it with locks that need a
    file open for writing) is changed unlocked, as before, with a warning."""
    if reading:
        yield
        return
    import fcntl

    fd = os.open(os.path.dirname(os.path.realpath(path)), os.O_RDONLY)
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConfigError(f"{path}: another command has been changing it for "
                                      f"{LOCK_WAIT_SECS:g} s") from None
                time.sleep(0.02)
            except OSError as ex:       # EBADF (NFS), ENOLCK, EOPNOTSUPP: no such lock here
                print(f"murmur-wsgi: warning: {path}: its folder cannot be locked "
                      f"({ex.strerror}); another hub key command at once may undo this one",
                      file=sys.stderr)
                break
        yield
    finally:
        os.close(fd)                    # the lock with it


def _write(path: str, text: str) -> None:
    """Replace hub.yaml whole, keeping its mode: it holds auth.jwt.secret, and a file the
    operator closed to others must not reopen at the umask's 0644. The staged file is made
    0600 in the same folder (mkstemp: a name no one made before), then given that mode.
    A link to hub.yaml is followed: the real file is replaced, the link stays one."""
    path = os.path.realpath(path)
    st = os.stat(path)
    mode = stat.S_IMODE(st.st_mode)
    fd, staged = tempfile.mkstemp(dir=os.path.dirname(path),
                                  prefix=".hub-key-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            _keep_owner(fh.fileno(), st)
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(staged, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise


def _keep_owner(fd: int, st: os.stat_result) -> None:
    """The staged file given hub.yaml's owner and group, as far as this user may: a file
    of root:murmur 0640 rewritten by root must stay readable by the hub's group."""
    if not hasattr(os, "fchown"):
        return
    for uid in (st.st_uid, -1):
        try:
            os.fchown(fd, uid, st.st_gid)
            return
        except PermissionError:
            continue


def _connected(config):
    """``redis_client``: a Redis Cluster's client reads the slot map as it is made, so nodes
    that refuse the URL's password fail here: one line (never a traceback, never the URL);
    none reachable fails at the first command, as a Redis that does not answer."""
    from murmur_wsgi.hub.store.base import StoreRefused

    try:
        return redis_client(config)
    except StoreRefused as ex:
        raise ConfigError(f"store: {ex}") from None
    except Exception as ex:  # noqa: BLE001 - one line, never a traceback
        raise ConfigError(f"the hub's Redis cannot be reached ({type(ex).__name__})") from None


def _store_checked(config) -> None:
    """What a worker's start refuses of the store, refused before gunicorn forks one, as
    ``--dev`` does: the client is made (a Redis Cluster's reads the slot map: nodes that
    refuse the URL's user, password or certificates are one line and exit 2) and closed at
    once, so no connection outlives this check into gunicorn. None answering is no
    refusal: the workers start, and answer -32603 until one does."""
    client = _connected(config)
    if client is not None:
        from murmur_wsgi.hub.store.redis_client import release

        release(client)


def _redis_table(redis) -> dict[str, str]:
    if redis is None:
        return {}
    try:
        return redis.hgetall(REDIS_KEYS)
    except Exception as ex:  # noqa: BLE001 - one line, never a traceback
        raise ConfigError(f"the hub's Redis cannot be reached ({type(ex).__name__})") from None


def _redis_set(redis, digest: str, value: str) -> None:
    if redis is None:
        return
    try:
        redis.hset(REDIS_KEYS, digest, value)
    except Exception as ex:  # noqa: BLE001 - one line, never a traceback
        raise ConfigError(f"the hub's Redis cannot be reached ({type(ex).__name__}); "
                          "hub.yaml is changed, the other replicas are not") from None


def mint(args, tenant: str, redis) -> int:
    """Mint ``mhk_…``: print the key once, record its digest in hub.yaml (and Redis).

    A Redis that does not answer before hub.yaml changes changes nothing; one that fails
    its write after still gets the key printed (hub.yaml holds it), with the error."""
    key, digest = mint_key()
    _redis_table(redis)                 # reachable, or one line and nothing changed
    with open(args.config, encoding="utf-8") as fh:
        text = fh.read()
    _write(args.config, add_digest(text, tenant, digest))
    try:
        _redis_set(redis, digest, tenant)
    except ConfigError:
        _print_key(key, tenant, digest)
        raise
    _print_key(key, tenant, digest)
    return 0


def _print_key(key: str, tenant: str, digest: str) -> None:
    try:
        sys.stdout.write(key + "\n")
        sys.stdout.flush()
    except OSError as ex:               # a closed pipe: the key is recorded, not shown
        raise ConfigError(f"the new key of tenant {tenant} is recorded but could not be "
                          f"printed ({ex.strerror}): revoke it with --revoke "
                          f"{digest[:12]}") from None


def tenant_digests(config, tenant: str, table: dict) -> list[tuple[str, str]]:
    """``(digest, where)`` of every key of the tenant: hub.yaml's (or ``MURMUR_HUB_TENANTS``'s,
    whose block wins over the file's when it is set), then Redis's only."""
    revoked = {d for d, t in table.items() if t == REVOKED}
    source = TENANTS_ENV if TENANTS_ENV in os.environ else "hub.yaml"
    found = [(d, source) for d in config.tenants[tenant]["api_keys"] if d not in revoked]
    known = {d for d, _ in found}
    found += [(d, "redis") for d, t in sorted(table.items()) if t == tenant and d not in known]
    return found


def list_keys(config, tenant: str, redis) -> int:
    for digest, where in tenant_digests(config, tenant, _redis_table(redis)):
        sys.stdout.write(f"{digest}  {where}\n")
    return 0


def revoke(args, config, tenant: str, redis) -> int:
    """Remove the key whose digest starts with ``--revoke`` from hub.yaml; mark it in Redis."""
    prefix = args.revoke.strip().lower()
    matches = [d for d, _ in tenant_digests(config, tenant, _redis_table(redis))
               if d.startswith(prefix)]
    if len(prefix) < 8 or len(matches) != 1:
        why = "names no key" if not matches else (
            f"names {len(matches)} keys" if len(matches) > 1 else "is shorter than 8 digits")
        raise ConfigError(f"--revoke {args.revoke}: {why} of tenant {tenant} "
                          f"(murmur-wsgi hub key {tenant} --list shows them)")
    digest = matches[0]
    with open(args.config, encoding="utf-8") as fh:
        text = fh.read()
    if digest in config.tenants[tenant]["api_keys"]:
        _write(args.config, remove_digest(text, tenant, digest))
    _redis_set(redis, digest, REVOKED)
    sys.stdout.write(f"revoked {digest}\n")
    return 0

