"""A SASL_SSL listener for the development broker: TLS with a certificate made here, SCRAM
(SHA-256 and SHA-512) and PLAIN users, so a secured cluster can be tried and tested locally.

`make_certificate` writes a self-signed certificate for 127.0.0.1 and ``localhost`` (a PKCS#12
keystore for the broker, a PEM file for clients to trust); `SaslSslListener` is what
`DevBroker(sasl_ssl=...)` adds to the broker's configuration. SCRAM credentials are written
into the KRaft metadata when storage is formatted (``kafka-storage format --add-scram``), so a
data folder formatted without them keeps having none.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Certificate", "SaslSslListener", "make_certificate"]

# Users and passwords go into JAAS and the storage tool's SCRAM syntax unquoted.
_SAFE = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class Certificate:
    """A self-signed server certificate: the broker's keystore and the clients' trust file."""

    keystore: Path
    """PKCS#12 with the key and the certificate."""
    keystore_password: str
    cafile: Path
    """The certificate in PEM, for ``SLUICEGATE_KAFKA_SSL_CAFILE``."""


def make_certificate(folder: Path, *, days: int = 30) -> Certificate:
    """A new key and self-signed certificate for 127.0.0.1 and localhost, written to ``folder``.

    Needs the ``cryptography`` package (a development dependency).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sluicegate dev broker")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    password = secrets.token_hex(16)
    # Algorithms every Java 17 reads (the newest defaults need a recent JDK update).
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(50_000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(password.encode())
    )
    folder.mkdir(parents=True, exist_ok=True)
    keystore = folder / "broker.p12"
    keystore.write_bytes(
        pkcs12.serialize_key_and_certificates(b"broker", key, certificate, None, encryption)
    )
    keystore.chmod(0o600)
    cafile = folder / "ca.pem"
    cafile.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return Certificate(keystore, password, cafile)


@dataclass(frozen=True, slots=True)
class SaslSslListener:
    """A SASL_SSL listener on 127.0.0.1:``port`` with ``users`` (name -> password), each
    known to SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN."""

    port: int
    certificate: Certificate
    users: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for user, password in self.users.items():
            if not (_SAFE.fullmatch(user) and _SAFE.fullmatch(password)):
                raise ValueError(
                    "dev broker users and passwords are letters, digits, '.', '_', '-'"
                )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def listener(self) -> str:
        return f"SASL_SSL://127.0.0.1:{self.port}"

    def properties(self) -> str:
        """The broker settings of the listener, appended to ``server.properties``."""
        prefix = "listener.name.sasl_ssl"
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        lines = [
            "# The SASL_SSL listener (sluicegate.devkafka.secure)",
            "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
            f"{prefix}.scram-sha-256.sasl.jaas.config={scram}",
            f"{prefix}.scram-sha-512.sasl.jaas.config={scram}",
            f"{prefix}.plain.sasl.jaas.config="
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};",
            f"{prefix}.ssl.keystore.type=PKCS12",
            f"{prefix}.ssl.keystore.location={self.certificate.keystore}",
            f"{prefix}.ssl.keystore.password={self.certificate.keystore_password}",
            f"{prefix}.ssl.key.password={self.certificate.keystore_password}",
        ]
        return "\n".join(lines) + "\n"

    def format_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that add every user's SCRAM credentials."""
        arguments = []
        for user, password in self.users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                arguments += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        return arguments
