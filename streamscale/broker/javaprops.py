"""librdkafka's client properties as Kafka's Java client reads them (Spark's Kafka connector).

A connection's properties use librdkafka's names (what kcat's ``-F`` and confluent-kafka take),
and most mean the same in Java (``client.id``, ``request.timeout.ms``, ``security.protocol``).
Security is where they part: librdkafka has ``sasl.username``/``sasl.password`` and PEM file paths,
Java a JAAS line and key or trust stores. Given to Spark's connector untranslated, Java's client
would ignore the credentials (an unknown property is only a warning in its log) and fail to
authenticate; so they are translated here, and a property with no Java equivalent that matters
for security is refused with a sentence, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from streamscale.errors import ConfigError

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# librdkafka-only security properties that Java's client has no equivalent for
_NO_EQUIVALENT = ("sasl.kerberos.", "sasl.oauthbearer.", "ssl.keystore.", "ssl.engine.", "ssl.providers")


def _jaas_quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read_pem(path: str, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror or exc}") from None


def java_properties(props: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The Java client's properties for librdkafka's ``props`` (see the module notes)."""
    p = dict(props)
    out: dict[str, str] = {}
    mechanism = (p.pop("sasl.mechanism", None) or p.pop("sasl.mechanisms", None) or "").upper()
    p.pop("sasl.mechanisms", None)
    if mechanism:
        out["sasl.mechanism"] = mechanism
    user, password = p.pop("sasl.username", None), p.pop("sasl.password", None)
    if user is not None or password is not None:
        module = _LOGIN_MODULES.get(mechanism or "GSSAPI")
        if module is None:
            raise ConfigError(
                f"sasl.username with sasl.mechanism {mechanism or 'GSSAPI'}: Spark's Kafka connector takes "
                "a user and password for PLAIN and SCRAM only (or choose connector=python)"
            )
        out["sasl.jaas.config"] = (
            f"{module} required username={_jaas_quoted(user or '')} password={_jaas_quoted(password or '')};"
        )
    ca = p.pop("ssl.ca.location", None)
    if ca:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = ca
    cert, key = p.pop("ssl.certificate.location", None), p.pop("ssl.key.location", None)
    if cert or key:
        if not (cert and key):
            raise ConfigError("a client certificate needs both ssl.certificate.location and ssl.key.location")
        out["ssl.keystore.type"] = "PEM"
        out["ssl.keystore.certificate.chain"] = _read_pem(cert, "ssl.certificate.location")
        out["ssl.keystore.key"] = _read_pem(key, "ssl.key.location")
    if "ssl.key.password" in p:
        out["ssl.key.password"] = p.pop("ssl.key.password")
    check = p.pop("ssl.endpoint.identification.algorithm", None)
    if check is not None:
        out["ssl.endpoint.identification.algorithm"] = "" if check.lower() == "none" else check
    for name in p:
        if name.startswith(_NO_EQUIVALENT):
            raise ConfigError(
                f"Kafka property {name!r} has no equivalent in Spark's Kafka connector (Java's client): "
                "choose connector=python, whose client is librdkafka"
            )
    return {**p, **out}
