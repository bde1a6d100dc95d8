"""ASGI entry point: HTTP through Django, WebSocket through Channels (origin-checked, session auth:
agentkit_site/ws_auth.py)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentkit_site.settings")
django_asgi_app = get_asgi_application()

from apps.engine.config import ConfigError  # noqa: E402
from apps.tasks.conf import agent_config  # noqa: E402

try:  # an invalid agentkit.yaml stops start-up with one readable line per bad field
    agent_config()
except ConfigError as exc:
    import sys

    print(f"agentkit: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

from apps.tasks.run.executors import warm_up  # noqa: E402

warm_up()  # import the runner and probe the sandbox now, not on the serving loop at the first task

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from agentkit_site.mcp_endpoint import McpEndpoint  # noqa: E402
from agentkit_site.routing import websocket_urlpatterns  # noqa: E402
from agentkit_site.serving import settle_heap  # noqa: E402
from agentkit_site.ws_auth import SessionAuthStack  # noqa: E402  (needs Django set up first)
from apps.tasks.run.reaper import reaping  # noqa: E402

# The reaper (tasks whose process died) runs on the serving loop from the first connection on.
application = reaping(
    ProtocolTypeRouter(
        {
            "http": McpEndpoint(django_asgi_app),  # /mcp: agentkit as an MCP server
            "websocket": AllowedHostsOriginValidator(
                SessionAuthStack(URLRouter(websocket_urlpatterns))
            ),
        }
    )
)

settle_heap()  # last: the channel layer built, the start-up heap frozen (serving.py)
