"""TLS material for Redis (:mod:`clients.ops.tls`): a CA kept and reused, a server certificate
made anew only when it no longer names every host, client certificates of the same CA."""

import ssl

from cryptography import x509

from fbgp_al.clients.ops.cli import main
from fbgp_al.clients.ops.tls import client_files, server_files


def _names(path) -> list[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(getattr(n, "value", n)) for n in names]


def test_a_kept_certificate_is_reused_until_a_host_is_missing_and_the_ca_stays(tmp_path):
    first = server_files(tmp_path, ["127.0.0.1", "localhost"])
    ca, cert = first.ca.read_bytes(), first.cert.read_bytes()
    assert server_files(tmp_path, ["localhost"]).cert.read_bytes() == cert
    again = server_files(tmp_path, ["127.0.0.1", "localhost", "10.0.0.5"])
    assert again.cert.read_bytes() != cert and again.ca.read_bytes() == ca
    assert _names(again.cert) == ["127.0.0.1", "localhost", "10.0.0.5"]
    for key in (again.key, tmp_path / "ca.key"):
        assert key.stat().st_mode & 0o777 == 0o600
    # the CA verifies the server's certificate and a client's
    context = ssl.create_default_context(cafile=str(again.ca))
    context.load_cert_chain(again.cert, again.key)  # its key matches
    client = client_files(tmp_path, "worker")
    context.load_cert_chain(client.cert, client.key)


def test_redis_certs_writes_what_a_kubernetes_tls_secret_holds(tmp_path, capsys):
    main(["redis-certs", "--out", str(tmp_path), "--host", "fbgp-redis", "--client", "api"])
    written = capsys.readouterr().out.split()
    assert [p.rsplit("/", 1)[1] for p in written] == [
        "ca.crt",
        "tls.crt",
        "tls.key",
        "api.crt",
        "api.key",
    ]
    assert _names(tmp_path / "tls.crt") == ["fbgp-redis"]
    ca = (tmp_path / "ca.crt").read_bytes()
    main(["redis-certs", "--out", str(tmp_path), "--host", "fbgp-redis"])  # renewed, same CA
    assert (tmp_path / "ca.crt").read_bytes() == ca
    main(["redis-certs", "--out", str(tmp_path), "--host", "fbgp-redis", "--new-ca"])
    assert (tmp_path / "ca.crt").read_bytes() != ca
