"""The production settings docs/deployment.md documents (read from its environment blocks):
`manage.py check --deploy` is clean with them (and is not without HTTPS=1); behind the TLS proxy
plain HTTP is redirected, except /healthz, which load balancers probe over plain HTTP at each
web process's address."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT, server_env
from tests.test_deployment_doc import doc_blocks, systemd_parse

# The settings as docs/deployment.md writes them (both environment blocks: behind the HTTPS
# proxy), with a real secret key in place of its "...".
DOCUMENTED = {
    **systemd_parse(doc_blocks()["environment"]),
    **systemd_parse(doc_blocks()["environment-https"]),
}
SETTINGS = ("DEBUG", "HTTPS", "HSTS_INCLUDE_SUBDOMAINS", "HSTS_PRELOAD", "ALLOWED_HOSTS")
PRODUCTION = {
    **{name: DOCUMENTED[name] for name in (*SETTINGS, "CSRF_TRUSTED_ORIGINS")},
    "SECRET_KEY": "k" * 10 + "a-long-and-random-production-secret-key-0123456789-xyz",
}
# A browser through the proxy (its public name), and a load balancer probing one web process at
# its address over plain HTTP.
PROBE = """
from django.test import Client
c = Client(HTTP_HOST="agentkit.example.com")
probe = Client(HTTP_HOST="10.0.0.11:8000")
print(c.get("/healthz").status_code, c.get("/accounts/login/").status_code,
      probe.get("/healthz").status_code)
"""


def _manage(tmp_path, *args, **env):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=server_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path):
    checked = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert checked.returncode == 0, checked.stderr + checked.stdout
    assert "no issues" in checked.stdout
    plain = {**PRODUCTION, "HTTPS": "0"}
    warned = _manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **plain)
    assert warned.returncode != 0 and "SESSION_COOKIE_SECURE" in warned.stderr


def test_behind_the_proxy_plain_http_is_redirected_but_healthz_is_not(tmp_path):
    assert _manage(tmp_path, "migrate", "-v", "0", **PRODUCTION).returncode == 0
    probed = _manage(tmp_path, "shell", "-c", PROBE, **PRODUCTION)
    assert probed.returncode == 0, probed.stderr
    assert probed.stdout.strip().splitlines()[-1] == "200 301 200"
