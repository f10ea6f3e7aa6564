"""draq's own certificates, made with `cryptography`: a CA and the serving certificates it signs.

Pure functions of their inputs and of `now`: no files, no API. Keys are ECDSA P-256 (fast to make
and to handshake with). The CA lives long and stays in a Secret; serving certificates live short
and are renewed well before they expire.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from admission.core.errors import InvalidInput

CA_LIFETIME = dt.timedelta(days=3650)
SERVING_LIFETIME = dt.timedelta(days=30)
# Renew once this fraction of the lifetime has passed: a 30-day certificate is renewed after 20 days.
RENEW_AFTER_FRACTION = 2 / 3
_CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def not_after(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc

    @property
    def not_before(self) -> dt.datetime:
        return self.certificate.not_valid_before_utc


def new_ca(common_name: str, now: dt.datetime, lifetime: dt.timedelta = CA_LIFETIME) -> KeyPair:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        _builder(name, name, key.public_key(), now, lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def issue_serving(
    ca: KeyPair,
    hosts: Sequence[str],
    now: dt.datetime,
    lifetime: dt.timedelta = SERVING_LIFETIME,
) -> KeyPair:
    """A serving certificate for DNS names and IP addresses (`127.0.0.1`, `draq-webhook.draq-system.svc`)."""
    if not hosts:
        raise InvalidInput("serving certificate", "hosts", "needs at least one DNS name or IP address")
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise InvalidInput("CA key", "key_pem", "is not an ECDSA key made by draq")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0][:64])])
    cert = (
        _builder(subject, ca_cert.subject, key.public_key(), now, lifetime)
        .add_extension(x509.SubjectAlternativeName([_general_name(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def renewal_due(pair: KeyPair, fraction: float = RENEW_AFTER_FRACTION) -> dt.datetime:
    """When a certificate should be replaced: after `fraction` of its lifetime."""
    lifetime = pair.not_after - pair.not_before
    return pair.not_before + lifetime * fraction


def needs_renewal(pair: KeyPair, now: dt.datetime, fraction: float = RENEW_AFTER_FRACTION) -> bool:
    return now >= renewal_due(pair, fraction)


def serves_hosts(pair: KeyPair, hosts: Sequence[str]) -> bool:
    """Whether the certificate names every host (a changed host list forces a new certificate)."""
    try:
        names = pair.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    present = {str(n) for n in names.get_values_for_type(x509.DNSName)}
    present |= {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    return all(str(_normalised(h)) in present for h in hosts)


def load_pair(cert_pem: bytes, key_pem: bytes, source: str) -> KeyPair:
    """Check that PEM data really is a certificate and its key; errors name the source."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as err:
        raise InvalidInput(source, "certificate", f"is not a PEM certificate ({err})") from err
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as err:
        raise InvalidInput(source, "key", f"is not an unencrypted PEM private key ({err})") from err
    if cert.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        raise InvalidInput(source, "key", "does not belong to the certificate")
    return KeyPair(cert_pem, key_pem)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey,
    now: dt.datetime, lifetime: dt.timedelta,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + lifetime)
    )


def _normalised(host: str) -> str | ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return host


def _general_name(host: str) -> x509.GeneralName:
    address = _normalised(host)
    if isinstance(address, str):
        return x509.DNSName(address)
    return x509.IPAddress(address)


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
