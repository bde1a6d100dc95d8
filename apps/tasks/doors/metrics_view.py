"""`GET /metrics`: this deployment's Prometheus metrics, in the text format (ops/metrics.py).

Answered to a client whose address is in `metrics.allowed_addresses` (agentkit.yaml; addresses
or networks, default the local host), or to any client that sends `Authorization: Bearer
<token>` of an active staff user's API token (`manage.py create_api_token USER`); others get 403
with what to do. With PROMETHEUS_MULTIPROC_DIR set (make cluster), the values of every process
on this host that wrote there — the other web processes and the RQ workers — are added up.
"""

from __future__ import annotations

import ipaddress

from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client import REGISTRY as PROCESS_REGISTRY

from apps.tasks import services
from apps.tasks.conf import agent_config
from apps.tasks.ops.metrics import StateCollector, multiprocess_dir


def _allowed_address(address: str, allowed: list[str]) -> bool:
    try:
        client = ipaddress.ip_address(address)
    except ValueError:
        return False
    if client.version == 6 and client.ipv4_mapped is not None:
        client = client.ipv4_mapped
    for entry in allowed:
        network = ipaddress.ip_network(entry, strict=False)
        if client.version == network.version and client in network:
            return True
    return False


def _refusal(request) -> HttpResponse | None:
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, key = header.partition(" ")
        user = None
        if scheme.lower() == "bearer" and key.strip():
            user = services.api_token_authenticate(key=key.strip())
        if user is not None and user.is_staff:
            return None
        return _forbidden("the token is unknown, revoked or not a staff user's")
    allowed = agent_config().metrics.allowed_addresses
    if _allowed_address(request.META.get("REMOTE_ADDR", ""), allowed):
        return None
    return _forbidden("this address is not in metrics.allowed_addresses")


def _forbidden(why: str) -> HttpResponse:
    return HttpResponse(
        f"403 Forbidden: {why}. Add the scraper's address to metrics.allowed_addresses in "
        "agentkit.yaml, or send 'Authorization: Bearer <token>' with a staff user's API token "
        "(manage.py create_api_token USER).\n",
        status=403,
        content_type="text/plain; charset=utf-8",
    )


def _registry() -> CollectorRegistry:
    directory = multiprocess_dir()
    if directory is None:
        registry = CollectorRegistry(auto_describe=True)
        for collector in (PROCESS_REGISTRY, StateCollector()):
            registry.register(collector)
        return registry
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    registry.register(StateCollector())
    return registry


@require_GET
def metrics_view(request):
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(generate_latest(_registry()), content_type=CONTENT_TYPE_LATEST)
