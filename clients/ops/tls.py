"""TLS material for Redis, made with ``cryptography``: a private CA and the certificates it
signs, as PEM files named as a Kubernetes TLS Secret names them (``ca.crt``, ``tls.crt``,
``tls.key``). ``fbgp-al up --redis-tls`` makes them once into its data directory and keeps them
(:func:`server_files`); ``fbgp-al redis-certs`` makes them for a Redis elsewhere (a Kubernetes
Secret's); the tests make them for servers of their own."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
LEAF_DAYS = 825  # what browsers and most TLS stacks accept of a certificate's lifetime
RENEW_DAYS = 30  # a kept server certificate this near its end is made anew


@dataclass(frozen=True)
class TlsFiles:
    """A CA's certificate, and a certificate it signed with that certificate's key."""

    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fbgp-al"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(
    common_name: str = "fbgp-al Redis CA",
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new CA: its private key (P-256) and its self-signed certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _alternative_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    common_name: str,
    hosts: Sequence[str] = (),
    *,
    client: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A key and a certificate signed by the CA: a server's for ``hosts`` (names and
    addresses, each in its subject alternative names, which TLS clients check; good for the
    server's own probes as a client too), or with ``client`` a client's (``common_name``
    only)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    # a server's certificate serves its own probes as a client too (redis-cli in its container,
    # where Redis asks every client for a certificate)
    usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if not client:
        usage.insert(0, ExtendedKeyUsageOID.SERVER_AUTH)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if hosts:
        names = [_alternative_name(h) for h in dict.fromkeys(hosts)]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    """``key`` as unencrypted PEM (Redis reads no encrypted key without its passphrase), mode
    0600 from its creation."""
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def ca_in(folder: Path, new: bool = False) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The CA of ``folder`` (``ca.crt``, ``ca.key``), made there if it has none (or ``new``)."""
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "ca.crt", folder / "ca.key"
    if not new and cert_path.exists() and key_path.exists():
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        return key, x509.load_pem_x509_certificate(cert_path.read_bytes())
    key, cert = make_ca()
    write_key(key_path, key)
    write_cert(cert_path, cert)
    return key, cert


def _covers(cert_path: Path, hosts: list[str]) -> bool:
    """Whether the certificate at ``cert_path`` names every one of ``hosts`` and is not near
    its end."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    if cert.not_valid_after_utc < _now() + datetime.timedelta(days=RENEW_DAYS):
        return False
    return all(_alternative_name(host) in names for host in hosts)


def server_files(folder: Path, hosts: list[str], renew: bool = False) -> TlsFiles:
    """The CA and a server certificate for ``hosts`` in ``folder`` (``ca.crt``, ``tls.crt``,
    ``tls.key``; the CA's key ``ca.key``): those kept there while the certificate names every
    host and is not near its end (and not ``renew``), else a new certificate by the same CA, so
    that clients that hold ``ca.crt`` keep trusting the server."""
    files = TlsFiles(folder / "ca.crt", folder / "tls.crt", folder / "tls.key")
    ca_key, ca_cert = ca_in(folder)
    if renew or not files.key.exists() or not _covers(files.cert, hosts):
        key, cert = issue(ca_key, ca_cert, hosts[0], hosts)
        write_key(files.key, key)
        write_cert(files.cert, cert)
    return files


def client_files(folder: Path, name: str) -> TlsFiles:
    """A client certificate ``NAME.crt`` and key ``NAME.key`` in ``folder``, by its CA."""
    ca_key, ca_cert = ca_in(folder)
    key, cert = issue(ca_key, ca_cert, name, client=True)
    files = TlsFiles(folder / "ca.crt", folder / f"{name}.crt", folder / f"{name}.key")
    write_key(files.key, key)
    write_cert(files.cert, cert)
    return files


def main(argv: list[str] | None = None) -> None:
    """``fbgp-al redis-certs``."""
    parser = argparse.ArgumentParser(
        prog="fbgp-al redis-certs",
        description="a CA and a server certificate for a Redis with TLS (and client "
        "certificates): ca.crt, tls.crt, tls.key, as a Kubernetes TLS Secret names them",
    )
    parser.add_argument("--out", type=Path, required=True, help="the folder to write them to")
    parser.add_argument(
        "--host",
        action="append",
        required=True,
        help="a name or address clients reach Redis by (each goes into the certificate; "
        "repeat it); the first is its common name",
    )
    parser.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="NAME",
        help="also a client certificate NAME.crt and NAME.key (repeat it)",
    )
    parser.add_argument(
        "--new-ca",
        action="store_true",
        help="make a new CA even if the folder has one (by default its ca.crt and ca.key sign "
        "the new certificates, so clients that trust it go on trusting Redis)",
    )
    args = parser.parse_args(argv)
    if args.new_ca:
        ca_in(args.out, new=True)
    files = server_files(args.out, args.host, renew=True)
    written = [files.ca, files.cert, files.key]
    for name in args.client:
        client = client_files(args.out, name)
        written += [client.cert, client.key]
    print("\n".join(str(path) for path in written))
    print(
        f"fbgp-al redis-certs: the CA's key is {args.out / 'ca.key'}: keep it off the "
        "cluster; it signs the next certificates",
        file=sys.stderr,
    )
