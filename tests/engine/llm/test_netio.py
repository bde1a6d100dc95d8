"""The gateway's asyncio network backend (apps/engine/llm/netio.py) over real sockets: plain HTTP
and TLS against the fake LLM server, certificate verification, a body larger than the read
buffer's limit, a server that closes mid-stream, and an idle pooled connection the server closed."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from apps.engine.llm import Gateway
from apps.engine.llm.errors import LLMConnectionError, LLMTimeoutError
from apps.engine.llm.gateway import http_client
from apps.engine.llm.netio import READ_BUFFER_HIGH, AsyncioTransport
from tests.engine.llm.conftest import ask, config_for
from tests.fakes.llm_server import FakeLLMServer, Fault

PROVIDERS = ["openai", "anthropic"]


def _certificate(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agentkit test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    ca, cert, key = _certificate(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    with FakeLLMServer(ssl_context=context) as server:
        yield server, ca


def _trusting(ca: Path) -> httpx.AsyncClient:
    context = ssl.create_default_context(cafile=ca)
    return httpx.AsyncClient(verify=context, transport=AsyncioTransport(ssl_context=context))


async def _collect(gateway: Gateway, request) -> tuple[list[str], object]:
    texts, response = [], None
    async for delta in gateway.stream(request):
        if delta.response is not None:
            response = delta.response
        else:
            texts.append(delta.text)
    return texts, response


def test_the_gateways_clients_read_through_the_asyncio_backend(llm_server):
    client = http_client(config_for(llm_server, {"main": "openai"}))
    assert isinstance(client._transport, AsyncioTransport)  # httpx names no public getter


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_over_tls_arrives_whole(tls_server, provider):
    server, ca = tls_server
    server.set_script(["The quick brown fox jumps over the lazy dog."])
    assert server.url.startswith("https://")
    async with _trusting(ca) as client:
        gateway = Gateway(config_for(server, {"main": provider}), http_client=client)
        texts, response = await _collect(gateway, ask())
        # the connection went back to the pool and is reused by the next call
        server.set_script(["Again."])
        again = await gateway.complete(ask())
    assert len(texts) == 9
    assert "".join(texts) == response.content == "The quick brown fox jumps over the lazy dog."
    assert again.content == "Again."


async def test_a_certificate_the_client_does_not_trust_is_refused(tls_server):
    server, _ = tls_server
    server.reset()
    server.set_script(["never seen"])
    config = config_for(server, {"main": "openai"}, attempts=1)
    async with Gateway(config) as gateway:  # the gateway's own client: the system's CAs only
        with pytest.raises(LLMConnectionError) as caught:
            await gateway.complete(ask())
    assert "CERTIFICATE_VERIFY_FAILED" in str(caught.value) or "certificate" in str(caught.value)
    assert server.requests == []


@pytest.mark.parametrize("tls", [False, True])
async def test_a_body_larger_than_the_read_buffer_arrives_intact(llm_server, tls_server, tls):
    server = tls_server[0] if tls else llm_server
    text = " ".join(f"{i:06d}" + "x" * 94 for i in range(3 * READ_BUFFER_HIGH // 100))
    server.set_script([{"text": text, "repeat": True}])
    client = (
        _trusting(tls_server[1]) if tls else http_client(config_for(server, {"main": "openai"}))
    )
    async with client:
        gateway = Gateway(config_for(server, {"main": "openai"}), http_client=client)
        response = await gateway.complete(ask())
        texts, streamed = await _collect(gateway, ask())
    assert response.content == text
    assert "".join(texts) == streamed.content == text


async def test_a_stream_the_server_cuts_is_an_error_not_an_answer(llm_server):
    llm_server.set_script(["one two three four five six"])
    llm_server.fail_next(Fault.disconnect(after_chunks=2))
    config = config_for(llm_server, {"main": "openai"}, attempts=1)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMConnectionError):
            await _collect(gateway, ask())


async def test_an_idle_connection_the_server_closed_is_not_reused(llm_server):
    """The pool asks an idle connection whether it is readable (`is_readable`): a connection the
    server closed must be dropped, not given to the next request."""
    llm_server.set_script(["first", "second"])
    async with Gateway(config_for(llm_server, {"main": "openai"}, attempts=1)) as gateway:
        assert (await gateway.complete(ask())).content == "first"
        llm_server.close_connections()
        assert (await gateway.complete(ask())).content == "second"


async def test_the_read_timeout_is_per_read_not_per_stream(llm_server):
    """Chunks 0.1-0.2 s apart for over a second, read timeout 0.35 s: no timeout (the one
    timer of a connection, armed at an earlier read, must not end a later one early)."""
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    llm_server.set_script([" ".join(words)])
    llm_server.tokens_per_second = 10
    config = config_for(llm_server, {"main": "openai"}, attempts=1, read_timeout=0.35)
    async with Gateway(config) as gateway:
        texts, response = await _collect(gateway, ask())
    assert response.content == " ".join(words) and len(texts) == len(words)


async def test_a_stream_that_stalls_after_its_first_chunks_times_out(llm_server):
    llm_server.set_script(["one two three four five six seven eight nine ten"])
    llm_server.tokens_per_second = 2  # about a second between chunks
    config = config_for(llm_server, {"main": "openai"}, attempts=1, read_timeout=0.3)
    async with Gateway(config) as gateway:
        with pytest.raises(LLMTimeoutError):
            await _collect(gateway, ask())


def test_socket_readable_is_true_once_the_peer_wrote_or_closed_and_for_a_gone_socket():
    """netio.socket_readable (our own poll, not httpcore's private helper)."""
    import socket

    from apps.engine.llm.netio import socket_readable

    ours, theirs = socket.socketpair()
    try:
        assert socket_readable(ours) is False  # idle: reusable
        theirs.send(b"x")
        assert socket_readable(ours) is True  # the server wrote out of turn
        ours.recv(1)
        theirs.close()
        assert socket_readable(ours) is True  # the server closed it
    finally:
        ours.close()
    assert socket_readable(ours) is True  # closed here: fileno -1
    assert socket_readable(None) is True
