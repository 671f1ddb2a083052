"""https is always verified: a self-signed server is refused before any byte of the request (or key) is sent."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading

import certifi
import pytest

from adk_actors import models
from adk_actors.errors import ProviderError
from adk_actors.models.gemini import transport

from .conftest import API_KEY, user


@pytest.fixture
def self_signed_server(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not available")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)  # accept() polls the stop event instead of blocking forever
    received: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                try:
                    with ctx.wrap_socket(conn, server_side=True) as tls:
                        received.append(tls.recv(65536))
                except (ssl.SSLError, OSError):
                    pass  # the client refused our certificate, as it must
            return

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}", received, cert
    finally:
        stop.set()
        thread.join(10)
        listener.close()
    assert not thread.is_alive()


def test_unverifiable_certificate_is_refused_and_no_request_is_sent(self_signed_server):
    base_url, received, _cert = self_signed_server
    with pytest.raises(ProviderError) as info:
        models.generate({"api_key": API_KEY, "base_url": base_url}, [user("x")])
    assert info.value.reason == "connection_error" and info.value.details["cause"] == "SSLError"
    assert received == []
    assert API_KEY not in repr(info.value) + str(info.value)


def test_ca_bundle_variables_of_the_environment_are_not_trusted(self_signed_server, monkeypatch):
    """The variables OpenSSL, requests and curl read name the server's own certificate: still refused, because the
    provider trusts certifi's bundle and nothing else."""
    base_url, received, cert = self_signed_server
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.setenv(name, str(cert))
    monkeypatch.setenv("SSL_CERT_DIR", str(cert.parent))
    transport._tls_context.cache_clear()  # build the process's context under these variables
    try:
        with pytest.raises(ProviderError) as info:
            models.generate({"api_key": API_KEY, "base_url": base_url}, [user("x")])
    finally:
        transport._tls_context.cache_clear()
    assert info.value.reason == "connection_error" and info.value.details["cause"] == "SSLError"
    assert received == []


def test_the_tls_context_requires_a_verified_certificate_for_the_host_from_certifi_only():
    context = transport._tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    with open(certifi.where(), encoding="ascii") as fh:
        bundled = fh.read().count("-----BEGIN CERTIFICATE-----")
    assert context.cert_store_stats()["x509_ca"] == bundled
