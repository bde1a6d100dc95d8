"""WebSocket endpoint /ws/chat/. Thin: checks access, dispatches on `type`, calls services."""

from __future__ import annotations

from channels.generic.websocket import AsyncJsonWebsocketConsumer

# Close code for "authentication required" (4000-4999 are free for applications).
CLOSE_UNAUTHENTICATED = 4401


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        await self.accept()

    async def receive_json(self, content, **kwargs) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        await self.send_error("unknown_message", f"unsupported message type {kind!r}")

    async def send_error(self, code: str, message: str, *, suggestions=None) -> None:
        await self.send_json(
            {
                "type": "error",
                "data": {
                    "error_struct": {
                        "error_code": code,
                        "message": message,
                        "suggestions": suggestions or [],
                        "retryable": False,
                    }
                },
            }
        )
