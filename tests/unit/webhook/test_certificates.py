"""draq's CA and serving certificates."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509

from admission.core.errors import InvalidInput
from admission.webhook.certificates import (
    issue_serving,
    load_pair,
    needs_renewal,
    new_ca,
    renewal_due,
    serves_hosts,
)

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def ca():  # type: ignore[no-untyped-def]
    return new_ca("draq-test-ca", NOW)


def test_serving_certificate_is_signed_by_the_ca_and_names_its_hosts(ca) -> None:  # type: ignore[no-untyped-def]
    pair = issue_serving(ca, ["draq-webhook.draq-system.svc", "127.0.0.1"], NOW)
    cert = pair.certificate
    cert.verify_directly_issued_by(ca.certificate)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["draq-webhook.draq-system.svc"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert serves_hosts(pair, ["127.0.0.1"]) and not serves_hosts(pair, ["other.svc"])
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True


def test_renewal_is_due_after_two_thirds_of_the_lifetime(ca) -> None:  # type: ignore[no-untyped-def]
    pair = issue_serving(ca, ["127.0.0.1"], NOW, dt.timedelta(days=30))
    due = renewal_due(pair)
    assert NOW + dt.timedelta(days=19) < due < NOW + dt.timedelta(days=21)
    assert not needs_renewal(pair, NOW + dt.timedelta(days=19))
    assert needs_renewal(pair, NOW + dt.timedelta(days=21))
    assert due < pair.not_after


def test_each_issue_is_a_new_key_and_serial(ca) -> None:  # type: ignore[no-untyped-def]
    first, second = (issue_serving(ca, ["127.0.0.1"], NOW) for _ in range(2))
    assert first.key_pem != second.key_pem
    assert first.certificate.serial_number != second.certificate.serial_number


def test_load_pair_checks_key_and_certificate(ca) -> None:  # type: ignore[no-untyped-def]
    pair = issue_serving(ca, ["127.0.0.1"], NOW)
    assert load_pair(pair.cert_pem, pair.key_pem, "test") == pair
    with pytest.raises(InvalidInput, match="does not belong to the certificate"):
        load_pair(pair.cert_pem, ca.key_pem, "files x")
    with pytest.raises(InvalidInput, match="files x, field certificate: is not a PEM certificate"):
        load_pair(b"junk", pair.key_pem, "files x")
    with pytest.raises(InvalidInput, match="field key"):
        load_pair(pair.cert_pem, b"junk", "files x")


def test_no_hosts_is_an_error(ca) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInput, match="hosts"):
        issue_serving(ca, [], NOW)
