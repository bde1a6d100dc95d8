"""The server's sections: `evolution`, `pitfalls`, `executor`, `workspaces`, `metrics`, `tracing`,
`events`."""

from __future__ import annotations

import os
from typing import Annotated, Literal

from pydantic import Field, field_validator

from apps.engine.config.base import NonNegInt, PositiveInt, Section


class EvolutionConfig(Section):
    """What apps.evolution learns from finished tasks (ARCHITECTURE.md section 3)."""

    enabled: bool = True
    # Failures and gave_up_after_reflections are always reflected on; successes are sampled
    # at this rate by a stable hash of the task id (the same task always gets the same answer).
    success_sample_rate: Annotated[float, Field(ge=0, le=1)] = 0.1
    # On: pitfalls are recorded but the optimizer proposes no prompt versions.
    observe_only: bool = True
    # Active pitfalls (of one skill or mode) that must agree before a PromptVersion is proposed.
    min_examples: PositiveInt = 3
    # A pitfall becomes active (retrievable) at this confidence; below it stays a candidate.
    min_confidence: Annotated[float, Field(ge=0, le=1)] = 0.5
    # Jobs waiting on queue `evolution` beyond this are dropped (logged and counted).
    max_pending: PositiveInt = 1000
    # A/B: share of a skill's (or mode's) tasks that run its newest approved PromptVersion as a
    # candidate instead of the active one (stable hash of the task id). 0: never.
    ab_share: Annotated[float, Field(ge=0, le=1)] = 0.0
    # Who writes the lessons: `rules` (the rule-based reflector: failures only) or `llm` (the
    # auxiliary model reads the run and writes lessons from failures and sampled successes;
    # when it fails, the rule-based reflector writes them). Both pass the same gates.
    reflector: Literal["rules", "llm"] = "rules"


class PitfallsConfig(Section):
    """Retrieval of pitfalls into the volatile block of the prompt at planning."""

    top_k: NonNegInt = 3
    min_severity: Literal["low", "medium", "high"] = "high"
    # Retrieval slower than this is abandoned with a warning; the task goes on without pitfalls.
    timeout_ms: PositiveInt = 200


class ExecutorConfig(Section):
    kind: Literal["inline", "rq"] = "inline"
    queue: str = "agent"
    # A run's process touches its task every 2 s; a task `queued` or `running` untouched for
    # this long has no live run: the reaper ends or resumes it (apps/tasks/run/reaper.py).
    orphan_after_seconds: float = Field(default=20.0, ge=5.0, le=3600.0)


class WorkspacesConfig(Section):
    """Workspaces people create from the chat page (apps/tasks/workspaces/workspaces.py)."""

    allowed_roots: list[str] = Field(default_factory=list)  # empty: "from a directory" is off
    upload_max_mb: PositiveInt = 50  # the archive as uploaded
    upload_max_unpacked_mb: PositiveInt = 500  # all its members together, once unpacked
    upload_max_files: PositiveInt = 20_000
    # Repository workspaces (apps/tasks/workspaces/repositories.py, worktrees.py): a finished task's worktree
    # is removed this many days after the task ended (its branch stays until merge or discard);
    # the worktrees of one workspace together may use this much disk, else a new task is refused.
    worktree_ttl_days: PositiveInt = 14
    worktree_max_mb: PositiveInt = 2000
    clone_timeout_seconds: PositiveInt = 300  # `git clone` of POST /api/workspaces
    git_timeout_seconds: PositiveInt = 60  # any other git command (merge, push, worktree add)

    @field_validator("allowed_roots")
    @classmethod
    def _absolute(cls, roots: list[str]) -> list[str]:
        for root in roots:
            if not os.path.isabs(root):
                raise ValueError(f"{root!r} is not an absolute path, e.g. /srv/projects")
        return roots


class MetricsConfig(Section):
    """`GET /metrics` (Prometheus text, apps/tasks/doors/metrics_view.py): who may read it without an API token."""

    # Client addresses (or networks, e.g. 10.0.0.0/8) allowed without a token; others need
    # `Authorization: Bearer <token>` of a staff user (manage.py create_api_token).
    allowed_addresses: list[str] = Field(default_factory=lambda: ["127.0.0.1", "::1"])

    @field_validator("allowed_addresses")
    @classmethod
    def _networks(cls, addresses: list[str]) -> list[str]:
        import ipaddress

        for address in addresses:
            try:
                ipaddress.ip_network(address, strict=False)
            except ValueError:
                message = f"{address!r} is no IP address or network, e.g. 10.0.0.0/8"
                raise ValueError(message) from None
        return addresses


class TracingConfig(Section):
    """OpenTelemetry traces (on only when the standard OTEL_* environment variables say so)."""

    # Put the prompts' and answers' text into model-call and tool-call spans. Off: spans carry
    # models, token counts, outcomes and durations only.
    include_text: bool = False


class EventsConfig(Section):
    """How a task's stored events age (apps/tasks/ops/retention.py)."""

    # Days after a task finished at which its token and reasoning events are folded into one
    # event per step (its chat replays the same); null: never.
    retention: PositiveInt | None = None
