"""WebSocket endpoint /ws/chat/ (ARCHITECTURE.md section 4). Thin: checks access through
selectors, dispatches on `type` to small `_handle_<type>` methods that call services; broadcast
handlers only send. A socket follows any number of tasks; for each it keeps the last `seq` it sent,
so replay + live delivery is in order and exactly once."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from apps.tasks import selectors, services
from apps.tasks.doors.intake import intake
from apps.tasks.events.local_delivery import delivered_any, follow, runs_on, task_group, unfollow
from apps.tasks.run import executors
from apps.tasks.services import ApplicationError

log = logging.getLogger(__name__)

# Database work of sockets runs on the shared thread pool, not on Django's one thread-sensitive
# thread: 50 sockets creating tasks at once would otherwise queue behind each other and behind
# every runner's and every handshake's queries there.
_db = functools.partial(sync_to_async, thread_sensitive=False)

# Close code for "authentication required" (4000-4999 are free for applications).
CLOSE_UNAUTHENTICATED = 4401
CATCH_UP_SECONDS = 2.0
# A socket opened as /ws/chat/?frames=batch (the chat page) gets the events that one delivery
# hands it (a flush's batch, a replayed page) as ONE frame {"type": "batch", "events": [...]}
# when there are several; other sockets get each event as its own frame.
BATCH_FRAME_MAX_EVENTS = 200
REQUIRED_FIELDS = {
    "user_message": ("text",),
    "cancel": ("task_id",),
    "resume": ("task_id",),
    "spec_review_reply": ("spec_review_id", "decision"),
}


class ChatConsumer(AsyncJsonWebsocketConsumer):
    async def dispatch(self, message) -> None:
        """channels' dispatch without its `aclose_old_connections()` before every message: that
        is a trip to Django's ONE thread-sensitive thread per handshake, per frame received and
        per channel-layer message, so 50 sockets queued behind each other there (and behind
        every other user of that thread) before their `connect` or their message was handled.
        It would only recycle that thread's connection; this consumer's database work runs on
        the default executor (`_db`), whose threads keep theirs."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def websocket_disconnect(self, message) -> None:
        """channels' websocket_disconnect without its closing `aclose_old_connections()`: a trip
        to the thread-sensitive thread per closed socket (see `dispatch`), 50 of them queued
        there when 50 tasks end together (bench/streaming.py)."""
        for group in self.groups:
            await self.channel_layer.group_discard(group, self.channel_name)
        await self.disconnect(message["code"])
        raise StopConsumer()

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.user = user
        self.sent_seq: dict[int, int] = {}
        self.finished: set[int] = set()
        self.grouped: set[int] = set()  # tasks whose channel-layer group this socket joined
        self.delivery = asyncio.Lock()  # replay, catch-up and live delivery never interleave
        self.loop = asyncio.get_running_loop()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.batch_frames = "batch" in query.get("frames", ())
        self.outbox: list[dict] = []  # events to send when the delivery in progress ends
        self.queued_deliveries: set[asyncio.Task] = set()  # deliver_local's batches as tasks
        await self.accept()
        self.catch_up = asyncio.create_task(self._catch_up_loop())

    async def disconnect(self, code) -> None:
        catch_up = getattr(self, "catch_up", None)
        if catch_up is not None:
            catch_up.cancel()
        for task_id in list(getattr(self, "sent_seq", {})):
            unfollow(task_id, self)
        for task_id in list(getattr(self, "grouped", ())):
            await self.channel_layer.group_discard(task_group(task_id), self.channel_name)

    async def _catch_up_loop(self) -> None:
        """A channel layer may drop messages (channels-redis drops silently when an inbox is
        full). The database is the source of truth: every few seconds, replay what a followed,
        unfinished task had already stored at the previous look and this socket still was not
        sent — events stored since are normally on their way through the channel layer, and
        replaying them too would only read the database for frames dropped as duplicates.
        Tasks running on this socket's own loop are left out: `deliver_local` drops nothing."""
        seen: dict[int, int] = {}  # task -> its stored last_seq at the previous look
        while True:
            await asyncio.sleep(CATCH_UP_SECONDS)
            # A run on this loop hands this socket every batch itself (deliver_local): nothing
            # of it can be dropped, and 50 sockets asking the database at once every few
            # seconds cost the streams a latency spike.
            pending = [
                t for t in self.sent_seq if t not in self.finished and not runs_on(t, self.loop)
            ]
            if not pending:
                seen.clear()
                continue
            stored = await _db(selectors.task_last_seqs)(task_ids=pending)
            for task_id, last_seq in stored.items():
                if seen.get(task_id, 0) > self.sent_seq.get(task_id, last_seq):
                    async with self.delivery:
                        await self._replay(task_id)
                        await self._send_frames()
            seen = dict(stored)

    # ── incoming ───────────────────────────────────────────────────────────────────────────────
    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        raw = text_data if text_data is not None else (bytes_data or b"").decode("utf-8", "replace")
        limit = settings.AGENTKIT_WS_MAX_FRAME_BYTES
        if len(raw.encode("utf-8")) > limit:
            await self.send_error(
                "frame_too_large",
                f"frames are limited to {limit // 1024} KB; send a shorter message",
            )
            return
        try:
            content = json.loads(raw)
        except json.JSONDecodeError as exc:
            await self.send_error(
                "malformed_json", f"the frame is not valid JSON ({exc.msg} at position {exc.pos})"
            )
            return
        await self.receive_json(content)

    async def receive_json(self, content, **kwargs) -> None:
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            await self.send_error(
                "malformed_message", 'a frame is a JSON object with a string "type"'
            )
            return
        kind = content["type"]
        if kind not in REQUIRED_FIELDS:
            await self.send_error(
                "unknown_message",
                f"unknown message type {kind!r}; expected one of {', '.join(sorted(REQUIRED_FIELDS))}",
            )
            return
        missing = [name for name in REQUIRED_FIELDS[kind] if content.get(name) in (None, "")]
        if missing:
            await self.send_error("missing_fields", f"{kind} needs {', '.join(missing)}")
            return
        try:
            await getattr(self, f"_handle_{kind}")(content)
        except ApplicationError as exc:
            await self.send_error(
                exc.extra.get("error_code", "invalid_request"),
                exc.message,
                task_id=content.get("task_id"),
            )

    async def _handle_user_message(self, content: dict) -> None:
        text = content["text"]
        if not isinstance(text, str):
            raise ApplicationError("'text' must be a string", {"error_code": "invalid_field"})
        after = _after_seq(content)

        created = await intake().create(user=self.user, content=content)
        task = created.task
        if not created.submitted:
            # A re-sent message (its `client_msg_id` made a task already): its sender may never
            # have learnt of that task (its socket died before the first event), so it gets the
            # task's events after `after_seq` (default: all of them, from seq 1); a socket
            # following the task already keeps its place.
            await self._follow(task.pk, after_seq=self.sent_seq.get(task.pk, after))
            return
        # A new task: its first events in hand (rq: its queued event, written before its job was
        # queued) are sent as they are; see `_follow` for one submitted to a run on this loop.
        start = created.events[0]["seq"] - 1 if created.events else task.last_seq
        await self._follow(task.pk, after_seq=start, known=created.events, fresh=True)

    async def _handle_resume(self, content: dict) -> None:
        after = _after_seq(content)
        task = await _db(selectors.task_for_user)(user=self.user, task_id=content["task_id"])
        if task is None:
            raise ApplicationError("task not found", {"error_code": "not_found"})
        await self._follow(task.pk, after_seq=after)

    async def _handle_cancel(self, content: dict) -> None:
        task = await _db(selectors.task_for_user)(user=self.user, task_id=content["task_id"])
        if task is None:
            raise ApplicationError("task not found", {"error_code": "not_found"})
        await _db(services.task_request_cancel)(task=task)

    async def _handle_spec_review_reply(self, content: dict) -> None:
        """confirm/reject a spec review (apps/specs); a parked spec's task runs again."""
        from apps.specs.services import spec_review_reply

        outcome = await _db(spec_review_reply)(
            user=self.user,
            review_id=content["spec_review_id"],
            decision=content["decision"],
            feedback=content.get("feedback") or "",
        )
        if outcome.continue_task:
            task_id = outcome.spec.task_id
            await _db(executors.task_submit)(task_id=task_id)
            await self._follow(task_id, after_seq=self.sent_seq.get(task_id, 0))

    async def _follow(
        self, task_id: int, *, after_seq: int, known: list | None = None, fresh: bool = False
    ) -> None:
        """Send `known` (events after `after_seq` the caller has in hand: a new task's
        `task_waiting`) at once, then join the task's group, then replay what is stored after
        the last event sent; live events queued meanwhile (behind `delivery`) are de-duplicated
        by seq in `_send_event`.

        No replay for events in hand, nor for a `fresh` task (created by this message) whose
        run on this loop has handed `deliver_local` nothing yet: from `follow` on, this socket
        gets every batch. Both are decided here, under the lock: while this socket waited for
        it, the run may have delivered batches (or ended) without it. Should a run elsewhere
        publish before the group join, the next event shows the gap and `_send_event` fills it
        from the database (the catch-up loop, if no event follows)."""
        async with self.delivery:
            new = task_id not in self.sent_seq
            if new:
                follow(task_id, self)
            local = runs_on(task_id, self.loop)
            replay = not (known or (fresh and local and not delivered_any(task_id)))
            self.sent_seq[task_id] = after_seq
            self.finished.discard(task_id)
            for event in known or ():
                self._send_in_order(event)
            await self._send_frames()

            if new and not local:  # else deliver_local has it all
                await self._join_group(task_id)
            if replay:
                await self._replay(task_id)
            await self._send_frames()

    async def join_group_unless_finished(self, task_id: int) -> None:
        """When the task's local run ended (local_delivery.local_run_ended): after the batches
        handed over before it (the lock is FIFO), join its group if the task goes on."""
        async with self.delivery:
            if task_id in self.finished or task_id not in self.sent_seq:
                return
        await self._join_group(task_id)

    async def _join_group(self, task_id: int) -> None:
        if task_id not in self.grouped:
            self.grouped.add(task_id)
            await self.channel_layer.group_add(task_group(task_id), self.channel_name)

    async def _replay(self, task_id: int) -> None:
        """Send the stored events after the last one sent, in order. Caller holds `delivery`."""
        while True:
            events = await _db(selectors.task_events_after_id)(
                task_id=task_id, seq=self.sent_seq[task_id]
            )
            if not events:
                return
            for event in events:
                self._send_in_order(event.as_message())
            await self._send_frames()

    # ── broadcast from the runner ──────────────────────────────────────────────────────────────
    async def task_event(self, message: dict) -> None:
        async with self.delivery:
            await self._send_event(message["event"])
            await self._send_frames()

    async def task_events(self, message: dict) -> None:
        """A batch from the runner (one per flush, recorder.py): one frame on a batch socket,
        else each event is its own frame."""
        async with self.delivery:
            for event in message["events"]:
                await self._send_event(event)
            await self._send_frames()

    async def _send_event(self, event: dict) -> None:
        task_id = event["task_id"]
        last = self.sent_seq.get(task_id)
        if last is None or event["seq"] <= last:
            return
        if event["seq"] != last + 1:
            # A gap (the channel layer dropped a message): fill it from the database.
            await self._replay(task_id)
            return
        self._send_in_order(event)

    def _send_in_order(self, event: dict) -> None:
        """Queue the event for `_send_frames` if it is the next one of its task."""
        task_id = event["task_id"]
        if event["seq"] != self.sent_seq[task_id] + 1:
            return
        self.sent_seq[task_id] = event["seq"]
        if event["type"] == "task_finished":
            self.finished.add(task_id)
        self.outbox.append(event)

    async def _send_frames(self) -> None:
        """Send the queued events, in order. Caller holds `delivery`."""
        events, self.outbox = self.outbox, []
        if not self.batch_frames:
            for event in events:
                await self.send_json(event)
            return
        for start in range(0, len(events), BATCH_FRAME_MAX_EVENTS):
            chunk = events[start : start + BATCH_FRAME_MAX_EVENTS]
            await self.send_json(
                chunk[0] if len(chunk) == 1 else {"type": "batch", "events": chunk}
            )

    async def send_error(self, code: str, message: str, *, suggestions=None, task_id=None) -> None:
        await self.send_json(
            {
                "type": "error",
                "task_id": task_id if isinstance(task_id, int) else None,
                "seq": None,
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


def _after_seq(content: dict) -> int:
    after = content.get("after_seq", 0)
    if not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise ApplicationError(
            "'after_seq' must be a non-negative integer", {"error_code": "invalid_field"}
        )
    return after
