"""A secured embedded Kafka: TLS from a CA made at start, SASL/SCRAM-SHA-512 users, ACLs on.

``--security sasl_ssl`` (``broker: {security: sasl_ssl}`` in a spec) gives the embedded broker or
cluster what a production Kafka has: one listener for clients and brokers, ``SASL_SSL`` with
SCRAM-SHA-512; the controller listener also over TLS, authenticated with SASL/PLAIN (KRaft
controllers cannot read SCRAM credentials: those live in the metadata log the controllers serve);
no PLAINTEXT listener at all; Kafka's ``StandardAuthorizer`` with the tool's user (and the
controllers' own) as super users, everyone else denied unless an ACL allows.

The material is made with ``cryptography``: a CA (its certificate is what clients trust), one
server certificate naming every node's address, signed by it; PEM files the JVM reads as they are
(``ssl.keystore.type=PEM``). Two SCRAM users are created when the storage is formatted: the tool's
(``streamscale``) and ``guest``, which has no ACLs (what a user without rights meets). Passwords
are random, written with the certificates in ``<data dir>/security`` (mode 0600); a broker started
again on kept storage reads them back, since the SCRAM credentials are in its metadata.

:meth:`Security.client_properties` is what every client needs, written as ``client.properties``:
librdkafka's names, which ``--kafka-config`` and kcat's ``-F`` read as they are.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import BrokerError

MODES = ("plaintext", "sasl_ssl")
TOOL_USER = "streamscale"
GUEST_USER = "guest"  # a valid SCRAM user with no ACLs
CONTROLLER_USER = "controller"
MECHANISM = "SCRAM-SHA-512"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


def check_mode(mode: str) -> str:
    mode = str(mode).strip().lower()
    if mode not in MODES:
        raise BrokerError(f"broker security {mode!r}: choose one of {', '.join(MODES)}")
    return mode


@dataclass
class Security:
    """The secrets and files of one secured broker or cluster (see the module notes)."""

    folder: str
    password: str
    guest_password: str
    controller_password: str
    hosts: tuple[str, ...] = ("127.0.0.1",)

    # -- files ----------------------------------------------------------------------------
    @property
    def ca_file(self) -> Path:
        return Path(self.folder) / "ca.pem"

    @property
    def keystore_file(self) -> Path:  # the server's private key and certificate chain
        return Path(self.folder) / "server.pem"

    @property
    def client_file(self) -> Path:
        return Path(self.folder) / "client.properties"

    @classmethod
    def prepare(cls, data_dir: Path, hosts: list[str]) -> Security:
        """The material in ``data_dir/security``: read back when a kept storage has it, else made."""
        folder = Path(data_dir) / "security"
        saved = folder / "security.json"
        if saved.exists():
            try:
                sec = cls(**json.loads(saved.read_text()))
            except (ValueError, TypeError) as exc:
                raise BrokerError(f"{saved} is damaged ({exc}): start on a new --data-dir") from None
            if set(hosts) <= set(sec.hosts) and sec.ca_file.exists() and sec.keystore_file.exists():
                return sec
            sec.hosts = tuple(dict.fromkeys([*sec.hosts, *hosts]))  # new addresses: a new certificate
        else:
            sec = cls(str(folder), secrets.token_urlsafe(18), secrets.token_urlsafe(18), secrets.token_urlsafe(18))
            sec.hosts = tuple(dict.fromkeys(["127.0.0.1", *hosts]))
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        _make_certificates(sec.ca_file, sec.keystore_file, list(sec.hosts))
        _write_private(saved, json.dumps({**asdict(sec), "hosts": list(sec.hosts)}, indent=2))
        _write_private(sec.client_file, _properties_text(sec.client_properties()))
        return sec

    # -- server side ----------------------------------------------------------------------
    def format_arguments(self) -> list[str]:
        """StorageTool's arguments that create the SCRAM users with the storage."""
        return [
            a
            for user, pw in ((TOOL_USER, self.password), (GUEST_USER, self.guest_password))
            for a in ("--add-scram", f"{MECHANISM}=[name={user},password={pw}]")
        ]

    def server_settings(self, host: str, port: int, controller_port: int, advertised: str) -> dict[str, str]:
        """A node's listeners and security settings (over the plaintext ones)."""
        scram = f'{_SCRAM_MODULE} required username="{TOOL_USER}" password="{self.password}";'
        plain = (
            f'{_PLAIN_MODULE} required username="{CONTROLLER_USER}" password="{self.controller_password}" '
            f'user_{CONTROLLER_USER}="{self.controller_password}";'
        )
        return {
            "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"SASL_SSL://{advertised}",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore_file),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_file),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{TOOL_USER};User:{CONTROLLER_USER}",
            "allow.everyone.if.no.acl.found": "false",
        }

    # -- client side ----------------------------------------------------------------------
    def client_properties(self, user: str = TOOL_USER) -> dict[str, str]:
        """librdkafka's properties for ``user`` (the tool's by default, or ``guest``)."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": self.password if user == TOOL_USER else self.guest_password,
            "ssl.ca.location": str(self.ca_file),
        }


class SecuredKafka:
    """What an embedded broker or cluster offers its clients: its connection, with the tool user's
    properties when it was started with ``sasl_ssl`` (``secrets`` set), none for plaintext."""

    secrets: Security | None = None
    bootstrap: str

    @property
    def connection(self) -> KafkaConnection:
        """How a client reaches it: the bootstrap, and with sasl_ssl the tool user's properties."""
        return KafkaConnection.of(self.bootstrap, self.client_properties())

    def client_properties(self, user: str = TOOL_USER) -> dict[str, str]:
        return {} if self.secrets is None else self.secrets.client_properties(user)


def _properties_text(props: dict[str, str]) -> str:
    head = "# streamscale's secured embedded Kafka: use with --kafka-config FILE, or kcat -F FILE\n"
    return head + "".join(f"{k}={v}\n" for k, v in props.items())


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _make_certificates(ca_file: Path, keystore_file: Path, hosts: list[str]) -> None:
    """A CA (certificate in ``ca_file``) and a server key + certificate naming ``hosts`` signed by
    it (``keystore_file``: the PKCS#8 key, then the certificate, then the CA's)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=825))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamscale embedded Kafka CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "streamscale embedded Kafka")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_file.write_bytes(ca.public_bytes(pem))
    _write_private(
        keystore_file,
        (
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
            + cert.public_bytes(pem)
            + ca.public_bytes(pem)
        ).decode(),
    )
