"""Push tests' parts: a real HTTPS receiver on 127.0.0.1 (a certificate the test makes),
a hub with push on, a recording sleeper, and the text's receiver-side verification."""
from __future__ import annotations

import base64
import datetime
import hashlib
import http.server
import ipaddress
import json
import socket
import ssl
import threading
import time

import jwt
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf import json_format

from a2a.types import a2a_pb2
from murmur_wsgi.hub import create_hub
from tests.hub.conftest import PUBLIC, HubClient, agent, close_hub, hub_config

SECRET = "push-master-secret-for-tests-0123456789"
HOOK_HOST = "hooks.test"


def make_cert(directory) -> tuple[str, str]:
    """A self-signed certificate for hooks.test and 127.0.0.1: (cert file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOOK_HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName(HOOK_HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


class Received:
    def __init__(self, path, headers, body):
        self.at = time.time()                # when it arrived (wall clock)
        self.path = path
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body)


class Receiver:
    """HTTPS on 127.0.0.1; answers the statuses in ``script`` in turn, then 200."""

    def __init__(self, cert_file: str, key_file: str):
        self.requests: list[Received] = []
        self.script: list[int] = []
        self.cond = threading.Condition()
        self.hold = threading.Event()        # cleared: every request waits until it is set
        self.hold.set()
        self.in_flight = 0
        self.most_in_flight = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver.cond:
                    receiver.in_flight += 1
                    receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
                    receiver.cond.notify_all()
                receiver.hold.wait(10)
                with receiver.cond:
                    receiver.in_flight -= 1
                    receiver.requests.append(Received(self.path, dict(self.headers), body))
                    status = receiver.script.pop(0) if receiver.script else 200
                    receiver.cond.notify_all()
                self.send_response(status)
                if 300 <= status < 400:
                    self.send_header("Location", "https://127.0.0.1:1/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)
        self.thread.start()

    def url(self, host: str = "127.0.0.1", path: str = "/a2a/hook") -> str:
        return f"https://{host}:{self.port}{path}"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.requests) >= count, timeout), \
                f"{len(self.requests)} of {count} notifications before the deadline"
            return list(self.requests)

    def close(self):
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()


class Sleeps:
    """The retry waits, recorded, never slept."""

    def __init__(self):
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> bool:
        self.calls.append(seconds)
        return True


class Resolver:
    """A resolver from a table: host -> addresses, a list of answers per call or a
    callable; a host not in it does not resolve. Records every call."""

    def __init__(self, table=None):
        self.table = {HOOK_HOST: ["127.0.0.1"], **(table or {})}
        self.calls: list[str] = []

    def __call__(self, host, port):
        self.calls.append(host)
        answer = self.table.get(host)
        if answer is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if callable(answer):
            return answer()
        return list(answer)


def push_config(receiver=None, public_url: str = PUBLIC, **push) -> dict:
    config = hub_config(public_url=public_url)
    agents = config["tenants"]["acme"]["agents"]
    agents["steps"] = agent("tests.hub.push_agents:steps")
    agents["big"] = agent("tests.hub.push_agents:big")
    block = {"enabled": True, "secret": SECRET}
    if receiver is not None:
        block.update(ports=[443, receiver.port], allow_networks=["127.0.0.0/8"],
                     ca_file=receiver.cert_file)
    block.update(push)
    config["push"] = block
    return config


def push_hub_on(request):
    """A hub with push on (no receiver), on the store ``request.param`` names: "memory", or
    "redis" (the session's redis-server, flushed). Close it with ``close_hub``."""
    config = push_config()
    if request.param == "redis":
        server = request.getfixturevalue("redis_server")
        server.flush()
        config["store"] = server.url
    return create_hub(config)


def push_hub(receiver=None, store: str = "memory", public_url: str = PUBLIC, **push):
    """A hub with push on, on ``store`` (the fixture ``store``'s setting), its retry waits
    recorded and its resolver a table."""
    config = push_config(receiver, public_url, **push)
    config["store"] = store
    hub = create_hub(config)
    hub.sleeps = Sleeps()
    hub.push.sender.sleep = hub.sleeps
    hub.resolver = Resolver()
    hub.push.egress.resolver = hub.resolver
    return hub


def verify(received: Received, key_from_create: str, audience: str, token=None,
           issuer: str = PUBLIC) -> dict:
    """The text's receiver snippet, exactly, plus its token check."""
    bearer = received.headers["Authorization"]
    assert bearer.startswith("Bearer ")
    bearer_token = bearer[len("Bearer "):]
    raw_body = received.body
    key = base64.urlsafe_b64decode(key_from_create + "=" * (-len(key_from_create) % 4))
    claims = jwt.decode(bearer_token, key, algorithms=["HS256"],
                        audience=audience, issuer=issuer)
    assert claims["bodySha256"] == hashlib.sha256(raw_body).hexdigest()
    if token is not None:
        assert claims["tokenSha256"] == hashlib.sha256(
            received.headers["A2A-Notification-Token"].encode()).hexdigest()
    return claims


def stream_response(received: Received):
    """The body parsed strictly as an a2a-sdk StreamResponse."""
    return json_format.Parse(received.body, a2a_pb2.StreamResponse(),
                             ignore_unknown_fields=False)


@pytest.fixture(scope="session")
def cert(tmp_path_factory):
    return make_cert(tmp_path_factory.mktemp("push-cert"))


@pytest.fixture
def receiver(cert):
    r = Receiver(*cert)
    r.cert_file = cert[0]
    yield r
    r.close()


@pytest.fixture
def phub(receiver, store):
    h = push_hub(receiver, store=store)
    yield h
    close_hub(h)


@pytest.fixture
def prpc(phub):
    return HubClient(phub)


def create(rpc, task_id, url, **fields):
    return rpc.result("CreateTaskPushNotificationConfig", {"taskId": task_id, "url": url,
                                                           **fields})


def status_of(rpc, task_id, config_id):
    return rpc.result("GetTaskPushNotificationConfig",
                      {"taskId": task_id, "id": config_id})["deliveryStatus"]
