"""The service in production: API keys on every route, per-caller rate limits, request ids and access logs,
Prometheus metrics, CORS, health probes, TLS, and draining on SIGTERM in a real server process."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi) is not installed")
pytest.importorskip("httpx", reason="httpx is needed to call the app")

import httpx

from bertkit.errors import ConfigError
from bertkit.serve import create_app
from bertkit.serve.access import ServeAccess, parse_rate
from bertkit.serve.middleware import is_public
from bertkit.serve.ratelimit import RateLimiter
from liveness import LIVENESS_S, wait_until

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-0123456789"


def call(app, method: str, path: str, **kwargs) -> httpx.Response:
    async def go():
        transport = httpx.ASGITransport(app=app, client=kwargs.pop("client", ("127.0.0.1", 5000)))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(go())


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def locked(encoder_dir):
    return create_app(encoder_dir, access=ServeAccess(api_key=[KEY, "second-key"]))


def every_route(app) -> list[tuple[str, str]]:
    """(method, path) of every route of ``app``, a mounted directory by one of its files."""
    out = []
    for route in app.routes:
        methods = getattr(route, "methods", None)
        if not methods:
            out.append(("GET", f"{route.path}/app.js"))
        out += [(m, route.path) for m in sorted(methods or ()) if m != "HEAD"]
    return out


# ------------------------------------------------------------------------------------------ keys
def test_every_route_needs_the_key_except_the_probes_page_and_docs(locked):
    routes = every_route(locked)
    assert ("POST", "/v1/embeddings") in routes and ("GET", "/metrics") in routes and len(routes) > 10
    for method, path in routes:
        none, wrong = call(locked, method, path), call(locked, method, path, headers=bearer("sk-wrong"))
        right = call(locked, method, path, headers=bearer(KEY))
        other = call(locked, method, path, headers=bearer("second-key"))
        assert right.status_code != 401 and other.status_code != 401, path
        if is_public(path):
            assert none.status_code == right.status_code, path
            continue
        for refused in (none, wrong, call(locked, method, path, headers={"Authorization": KEY})):
            assert refused.status_code == 401, f"{method} {path}"
            assert refused.headers["www-authenticate"].startswith("Bearer")
            error = refused.json()["error"]
            if path.startswith("/v1/"):  # OpenAI's shape, which its clients turn into AuthenticationError
                assert error["code"] == "invalid_api_key" and "Authorization: Bearer" in error["message"]
            else:
                assert "Authorization: Bearer" in error
    assert {"/health", "/health/ready", "/health/live", "/docs", "/openapi.json", "/"} <= {
        p for _, p in routes if is_public(p)
    }


def test_keys_from_the_environment_and_a_file_reloaded_when_it_changes(encoder_dir, tmp_path, monkeypatch):
    keys = tmp_path / "keys.txt"
    keys.write_text("# team keys\nfile-key-1\n\n", encoding="utf-8")
    monkeypatch.setenv("BERTKIT_API_KEY", "env-a, env-b")
    app = create_app(encoder_dir, access=ServeAccess(api_key_file=str(keys)))
    ok = lambda key: call(app, "GET", "/info", headers=bearer(key)).status_code  # noqa: E731
    assert ok("file-key-1") == ok("env-a") == ok("env-b") == 200
    assert ok("# team keys") == ok("") == 401
    keys.write_text("file-key-2 rotated\n", encoding="utf-8")  # another size: seen without a signal
    assert ok("file-key-1") == 401 and ok("file-key-2 rotated") == 200
    stamp = keys.stat()
    keys.write_text("file-key-3 rotated\n", encoding="utf-8")  # same size and time: needs SIGHUP's reload
    os.utime(keys, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    app.state.keys.ask_reload()
    assert ok("file-key-2 rotated") == 401 and ok("file-key-3 rotated") == 200


def test_access_log_is_json_lines_with_the_request_id_and_never_the_key(encoder_dir, caplog):
    app = create_app(encoder_dir, access=ServeAccess(api_key=[KEY], log_format="json"))
    with caplog.at_level(logging.INFO, logger="bertkit.serve.access"):
        given = call(app, "POST", "/embed", json={"texts": ["hello"]}, headers={**bearer(KEY), "X-Request-ID": "abc-1"})
        made = call(app, "GET", "/info", headers=bearer("sk-not-" + KEY))
        hostile = call(app, "GET", "/health", headers={"X-Request-ID": "a b<script>"})
    assert given.status_code == 200 and given.headers["x-request-id"] == "abc-1"
    assert made.status_code == 401 and len(made.headers["x-request-id"]) == 32
    assert hostile.headers["x-request-id"] != "a b<script>"  # not echoed as given: made up instead
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "bertkit.serve.access"]
    assert [(x["method"], x["path"], x["status"]) for x in lines] == [
        ("POST", "/embed", 200),
        ("GET", "/info", 401),
        ("GET", "/health", 200),
    ]
    assert lines[0]["request_id"] == "abc-1" and lines[0]["client"] == "127.0.0.1" and lines[0]["duration_ms"] >= 0
    assert KEY not in caplog.text


# ------------------------------------------------------------------------------------------ rate limits
def test_the_token_bucket_refuses_past_the_burst_and_refills_with_the_clock():
    now = [100.0]
    limiter = RateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a") == pytest.approx(0.5) and limiter.take("b") == 0.0  # per client
    now[0] += 0.5
    assert limiter.take("a") == 0.0 and limiter.take("a") > 0
    now[0] += 60
    assert [limiter.take("a") for _ in range(4)].count(0.0) == 3  # refilled to the burst, no more
    assert parse_rate("20/s") == 20 and parse_rate("600/m") == 10 and parse_rate(" 3 / min ") == 0.05
    for bad in ("fast", "0/s", "10/h", "-1/s"):
        with pytest.raises(ConfigError, match="--rate-limit"):
            parse_rate(bad)


def test_rate_limit_429_with_retry_after_per_key_then_recovery(encoder_dir):
    app = create_app(encoder_dir, access=ServeAccess(api_key=["k1", "k2"], rate_limit="60/m", rate_burst=2))
    now = [0.0]
    app.state.limiter.clock = lambda: now[0]
    codes = [call(app, "GET", "/info", headers=bearer("k1")).status_code for _ in range(3)]
    refused = call(app, "POST", "/v1/embeddings", json={"input": "x"}, headers=bearer("k1"))
    assert codes == [200, 200, 429] and refused.status_code == 429
    assert refused.headers["retry-after"] == "1" and refused.json()["error"]["code"] == "rate_limit_exceeded"
    assert call(app, "GET", "/info", headers=bearer("k2")).status_code == 200  # another key, its own bucket
    assert call(app, "GET", "/health").status_code == 200  # probes are never limited
    guesses = [call(app, "GET", "/info", headers=bearer(f"guess-{i}")).status_code for i in range(3)]
    assert guesses == [401, 401, 429]  # key guessing from one address is limited as well
    now[0] += 1.0
    assert call(app, "GET", "/info", headers=bearer("k1")).status_code == 200
    open_app = create_app(encoder_dir, access=ServeAccess(rate_limit="1/s"))  # no keys: per client address
    open_app.state.limiter.clock = lambda: 0.0
    assert call(open_app, "GET", "/info", client=("10.0.0.1", 1)).status_code == 200
    assert call(open_app, "GET", "/info", client=("10.0.0.1", 2)).status_code == 429
    assert call(open_app, "GET", "/info", client=("10.0.0.2", 1)).status_code == 200


# ------------------------------------------------------------------------------------------ metrics, probes
def test_metrics_parse_and_move(encoder_dir):
    parser = pytest.importorskip("prometheus_client.parser", reason="the metrics extra is not installed")
    app = create_app(encoder_dir)

    def scrape() -> dict[tuple[str, tuple], float]:
        text = call(app, "GET", "/metrics").text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples
        }

    before = scrape()
    for _ in range(3):
        assert call(app, "POST", "/embed", json={"texts": ["hello world", "a b"]}).status_code == 200
    assert call(app, "POST", "/embed", json={"texts": []}).status_code == 422
    call(app, "GET", "/no/such/path/123")
    after = scrape()
    ok = ("bertkit_requests_total", (("method", "POST"), ("route", "/embed"), ("status", "200")))
    assert before.get(ok, 0) == 0 and after[ok] == 3
    assert after[("bertkit_requests_total", (("method", "POST"), ("route", "/embed"), ("status", "422")))] == 1
    assert after[("bertkit_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "404")))] == 1
    assert after[("bertkit_request_duration_seconds_count", (("route", "/embed"),))] == 4
    assert after[("bertkit_batch_size_count", ())] == 3 and after[("bertkit_batch_size_sum", ())] == 6
    assert after[("bertkit_tokens_total", ())] == 3 * (4 + 4)  # [CLS] hello world [SEP], [CLS] a b [SEP]
    assert after[("bertkit_queue_depth", ())] == 0 and after[("bertkit_model_load_seconds", ())] > 0


def test_without_prometheus_client_metrics_says_which_extra(encoder_dir, monkeypatch):
    from bertkit.serve import prometheus

    monkeypatch.setattr(prometheus, "available", lambda: False)
    response = call(create_app(encoder_dir), "GET", "/metrics")
    assert response.status_code == 501 and "bertkit[metrics]" in response.json()["error"]
    told: list[str] = []
    prometheus.tell_if_missing(told.append)
    assert len(told) == 1 and "bertkit[metrics]" in told[0]


def test_probes_answer_503_while_draining(encoder_dir):
    app = create_app(encoder_dir)
    assert call(app, "GET", "/health/ready").json() == {"status": "ok"}
    app.state.service.state = "draining"
    assert call(app, "GET", "/health").status_code == call(app, "GET", "/health/ready").status_code == 503
    assert call(app, "GET", "/health").json() == {"status": "draining"}
    assert call(app, "GET", "/health/live").status_code == 200


def test_cors_is_closed_by_default_and_open_to_the_origins_given(encoder_dir):
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}
    preflight["Access-Control-Request-Headers"] = "authorization,content-type"
    closed = call(create_app(encoder_dir), "GET", "/health", headers={"Origin": "https://app.example"})
    assert "access-control-allow-origin" not in closed.headers
    app = create_app(encoder_dir, access=ServeAccess(api_key=[KEY], cors_origin=["https://app.example"]))
    answer = call(app, "OPTIONS", "/embed", headers=preflight)  # a browser's preflight carries no key
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "https://app.example"
    denied = call(app, "OPTIONS", "/embed", headers={**preflight, "Origin": "https://evil.example"})
    assert denied.status_code == 400
    post = call(app, "POST", "/embed", json={"texts": ["a"]}, headers={"Origin": "https://app.example", **bearer(KEY)})
    assert post.status_code == 200 and post.headers["access-control-allow-origin"] == "https://app.example"


def test_bad_settings_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="--ssl-certfile and --ssl-keyfile"):
        ServeAccess(ssl_certfile=str(tmp_path))
    with pytest.raises(ConfigError, match=r"--api-key-file .*no such file"):
        ServeAccess(api_key_file=str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="--log-format"):
        ServeAccess(log_format="xml")  # type: ignore[arg-type]


def test_one_warning_when_listening_beyond_loopback_without_a_key(encoder_dir, monkeypatch, caplog):
    import uvicorn

    from bertkit.serve import app as serve_app

    run_server = serve_app.run_server
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)
    monkeypatch.setattr(serve_app, "_log_access_lines", lambda level: None)
    monkeypatch.setattr(signal, "signal", lambda *args: None)
    with caplog.at_level(logging.WARNING, logger="bertkit.serve"):
        run_server(create_app(encoder_dir), "0.0.0.0", 8000)
        run_server(create_app(encoder_dir, access=ServeAccess(api_key=[KEY])), "0.0.0.0", 8000)
        run_server(create_app(encoder_dir), "127.0.0.1", 8000)
    lines = [r.getMessage() for r in caplog.records if "without an API key" in r.getMessage()]
    assert len(lines) == 1 and "0.0.0.0" in lines[0] and KEY not in caplog.text


# ------------------------------------------------------------------------------------------ TLS
def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with ``cryptography`` or else the openssl command."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if subprocess.run(["which", "openssl"], capture_output=True).returncode != 0:
            pytest.skip("neither cryptography nor openssl can make a test certificate")
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
                *("-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"),
                *("-addext", "subjectAltName=IP:127.0.0.1"),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert, key


def test_tls_round_trip_with_a_self_signed_certificate(encoder_dir, tmp_path):
    import ssl

    import uvicorn

    from bertkit.serve.app import server_config

    cert, key = self_signed(tmp_path)
    access = ServeAccess(api_key=[KEY], ssl_certfile=str(cert), ssl_keyfile=str(key))
    app = create_app(encoder_dir, access=access)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = server_config(app, "127.0.0.1", sock.getsockname()[1], access, log_level="warning")
    assert config.ssl_certfile == str(cert) and config.ssl_keyfile == str(key)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "the server to start", alive=thread.is_alive)
        base = f"https://127.0.0.1:{sock.getsockname()[1]}"
        context = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(base_url=base, verify=context, timeout=LIVENESS_S) as client:
            answer = client.post("/embed", json={"texts": ["over tls"]}, headers=bearer(KEY))
            assert answer.status_code == 200 and len(answer.json()["embeddings"][0]) == 128
            assert client.get("/info").status_code == 401
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate
            httpx.get(f"{base}/health", timeout=LIVENESS_S)
        with pytest.raises(httpx.RemoteProtocolError):  # plain HTTP on the TLS port
            httpx.get(f"http://127.0.0.1:{sock.getsockname()[1]}/health", timeout=LIVENESS_S)
    finally:
        server.should_exit = True
        thread.join(timeout=LIVENESS_S)
        sock.close()


# ------------------------------------------------------------------------------------------ SIGTERM
DRAIN_SERVER = """
import asyncio, sys
from pathlib import Path
from bertkit.serve.access import ServeAccess
from bertkit.serve.app import create_app, run_server

model, port, gate = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
access = ServeAccess(graceful_timeout=120)
app = create_app(model, access=access)


async def slow() -> dict:  # the test's slow request: it finishes when the test says so
    (gate / "started").touch()
    while not (gate / "release").exists():
        await asyncio.sleep(0.01)
    return {"done": True}


app.add_api_route("/slow", slow, methods=["GET"])
run_server(app, "127.0.0.1", port, access, log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition, what: str, limit: float = LIVENESS_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


def test_sigterm_finishes_the_request_in_flight_refuses_new_ones_and_exits_0(encoder_dir, tmp_path):
    pytest.importorskip("uvicorn")
    script, port = tmp_path / "server.py", free_port()
    script.write_text(DRAIN_SERVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, str(script), str(encoder_dir), str(port), str(tmp_path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: process.poll() is not None or not refused(port), "the server to listen")
        assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(r=httpx.get(f"{base}/slow", timeout=LIVENESS_S)))
        thread.start()
        wait_for((tmp_path / "started").exists, "the slow request to start")
        process.send_signal(signal.SIGTERM)
        wait_for(lambda: refused(port), "the listening socket to close")
        assert process.poll() is None  # still draining: the slow request is in flight
        (tmp_path / "release").touch()
        thread.join(timeout=LIVENESS_S)
        assert result["r"].status_code == 200 and result["r"].json() == {"done": True}
        assert process.wait(timeout=LIVENESS_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# ------------------------------------------------------------------------------------------ loading
def test_while_loading_readiness_and_every_route_answer_503_and_liveness_200(encoder_dir):
    from bertkit.serve.keys import KeyRing
    from bertkit.serve.loading_app import Starting

    keys = KeyRing([KEY])
    starting = Starting(lambda: create_app(encoder_dir, access=ServeAccess(api_key=[KEY]), keys=keys), keys)
    assert call(starting, "GET", "/health").status_code == call(starting, "GET", "/health/ready").status_code == 503
    assert call(starting, "GET", "/health/ready").json() == {"status": "loading"}
    assert call(starting, "GET", "/health/live").json() == {"status": "alive"}
    embed = call(starting, "POST", "/embed", json={"texts": ["a"]}, headers=bearer(KEY))
    assert embed.status_code == 503 and embed.headers["retry-after"] == "5" and "loading" in embed.json()["error"]
    openai = call(starting, "POST", "/v1/embeddings", json={"input": "a"}, headers=bearer(KEY))
    assert openai.status_code == 503 and openai.json()["error"]["type"] == "server_error"
    starting.start(stop=lambda: None).join(timeout=LIVENESS_S)
    assert starting.state == "ready" and call(starting, "GET", "/health").json() == {"status": "ok"}
    assert call(starting, "POST", "/embed", json={"texts": ["a"]}, headers=bearer(KEY)).status_code == 200
    assert call(starting, "POST", "/embed", json={"texts": ["a"]}).status_code == 401
    starting.drain()
    assert call(starting, "GET", "/health").json() == {"status": "draining"}


def test_a_failed_load_stops_the_server_and_keeps_its_error():
    from bertkit.errors import CheckpointError
    from bertkit.serve.keys import KeyRing
    from bertkit.serve.loading_app import Starting

    def broken():
        raise CheckpointError("model.safetensors is truncated")

    stopped: list[bool] = []
    starting = Starting(broken, KeyRing([]))
    starting.start(stop=lambda: stopped.append(True)).join(timeout=LIVENESS_S)
    assert stopped == [True] and starting.state == "failed"
    with pytest.raises(CheckpointError, match="truncated"):
        starting.raise_failure()


# `bertkit serve` whose load waits for the test's gate file: the port must answer before the model is loaded.
SLOW_LOAD_SERVER = """
import sys, time
from pathlib import Path
import bertkit.inference
from bertkit.errors import CheckpointError

gate, fail = Path(sys.argv[1]), sys.argv[2] == "fail"
real_load = bertkit.inference.load


def slow_load(*args, **kwargs):
    while not gate.exists():
        time.sleep(0.01)
    if fail:
        raise CheckpointError("model.safetensors is truncated")
    return real_load(*args, **kwargs)


bertkit.inference.load = slow_load
from bertkit.cli import main

sys.exit(main(["serve", "--model", sys.argv[3], "--port", sys.argv[4], "--api-key", sys.argv[5]]))
"""


def start_slow_server(tmp_path: Path, model: Path, outcome: str) -> tuple[subprocess.Popen, str]:
    script, port = tmp_path / "server.py", free_port()
    script.write_text(SLOW_LOAD_SERVER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(script), str(tmp_path / "gate"), outcome, str(model), str(port), KEY]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: process.poll() is not None or not refused(port), "the server to listen")
    assert process.poll() is None, process.communicate()[1]
    return process, f"http://127.0.0.1:{port}"


def test_serve_opens_the_port_while_loading_then_serves(encoder_dir, tmp_path):
    pytest.importorskip("uvicorn")
    process, base = start_slow_server(tmp_path, encoder_dir, "succeed")
    try:
        assert httpx.get(f"{base}/health", timeout=LIVENESS_S).status_code == 503
        assert httpx.get(f"{base}/health/live", timeout=LIVENESS_S).status_code == 200
        early = httpx.post(f"{base}/embed", json={"texts": ["a"]}, headers=bearer(KEY), timeout=LIVENESS_S)
        assert early.status_code == 503 and "retry-after" in early.headers
        (tmp_path / "gate").touch()
        wait_for(lambda: httpx.get(f"{base}/health", timeout=LIVENESS_S).status_code == 200, "the model to load")
        answer = httpx.post(f"{base}/embed", json={"texts": ["a"]}, headers=bearer(KEY), timeout=LIVENESS_S)
        assert answer.status_code == 200 and len(answer.json()["embeddings"][0]) == 128
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=LIVENESS_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_serve_whose_load_fails_exits_2_with_one_line(encoder_dir, tmp_path):
    pytest.importorskip("uvicorn")
    process, base = start_slow_server(tmp_path, encoder_dir, "fail")
    try:
        assert httpx.get(f"{base}/health/ready", timeout=LIVENESS_S).json() == {"status": "loading"}
        (tmp_path / "gate").touch()
        assert process.wait(timeout=LIVENESS_S) == 2
        errors = [line for line in process.communicate()[1].splitlines() if line.startswith("bertkit: error:")]
        assert errors == ["bertkit: error: model.safetensors is truncated"]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_sigterm_while_loading_exits_0(encoder_dir, tmp_path):
    pytest.importorskip("uvicorn")
    process, base = start_slow_server(tmp_path, encoder_dir, "succeed")
    try:
        assert httpx.get(f"{base}/health/ready", timeout=LIVENESS_S).json() == {"status": "loading"}
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=LIVENESS_S) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
