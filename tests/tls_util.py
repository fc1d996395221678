"""Certificates for the tests' TLS servers, made with ``cryptography`` (a dependency of the
project's own): no openssl CLI.

``Authority(directory, name)`` is a CA (``ca_file``) that ``issue`` signs certificates with:
a server's for 127.0.0.1 and localhost, or a client's (mutual TLS), each a
``(cert file, key file)`` pair of PEM files in ``directory``. ``server_options`` are a
redis-server's on TLS only, with a certificate it issued.
"""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class Authority:
    def __init__(self, directory, name: str = "test-ca"):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        cert = self._builder(_name(name), self._key.public_key()).add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        ).sign(self._key, hashes.SHA256())
        self.ca_file = str(self.directory / f"{name}.pem")
        Path(self.ca_file).write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def _builder(self, subject: x509.Name, public_key) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.timezone.utc)
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(_name(self.name))
                .public_key(public_key).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1)))

    def issue(self, common: str = "localhost", elsewhere: bool = False) -> tuple[str, str]:
        """A certificate for ``common``, 127.0.0.1 and localhost (``elsewhere``: for
        ``common`` only): (cert file, key file)."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.DNSName(common)] if elsewhere else \
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = self._builder(_name(common), key.public_key()).add_extension(
            x509.SubjectAlternativeName(names), critical=False).sign(self._key, hashes.SHA256())
        # NOTE: files of their own: a server started just before still reads its own.
        stem = self.directory / f"{self.name}-{common}-{cert.serial_number:x}"
        cert_file, key_file = Path(f"{stem}.pem"), Path(f"{stem}.key")
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return str(cert_file), str(key_file)

    def server_options(self, port: int, host: str | None = None,
                       clients: str = "optional") -> list[str]:
        """redis-server's options for TLS only on ``port``: a certificate for 127.0.0.1 and
        localhost (``host``: for that name only), clients' certificates ``clients``
        (``tls-auth-clients``: optional, or yes for mutual TLS)."""
        cert, key = self.issue(host, elsewhere=True) if host else self.issue()
        return ["--port", "0", "--tls-port", str(port), "--tls-cert-file", cert,
                "--tls-key-file", key, "--tls-ca-cert-file", self.ca_file,
                "--tls-auth-clients", clients]
