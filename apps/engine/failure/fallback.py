"""The failure chain of a react run: main attempt → Recovery → Emergency (seed 001 U2-U3).

Recovery (KTD4) lives in ReActEngine.run(): after a failed attempt, one reflect call on the main
model and another attempt in the same run, `fallback_chain.recovery.max_retries` times. What it
does not fix reaches Emergency: `EmergencyRules.classify(exc, config)` maps the exception behind
the failure, by type (KTD3), to an `EmergencyError` — a stable error_code, an English message,
suggestions, whether a retry may help, and the original error text for the task's owner.
Messages, suggestions and retryable are overridable per rule in agentkit.yaml
(`fallback_chain.emergency.rules`). Cancellation is never classified: it propagates.

The structs the engine itself ends a run with are in structs.py; Emergency turns them into the
rules' codes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from apps.engine.config import EMERGENCY_RULES, FallbackChainConfig
from apps.engine.events import ErrorStruct
from apps.engine.llm import errors as llm
from apps.engine.llm.text import storable
from apps.engine.loop import flow
from apps.engine.sandbox import SandboxUnavailable


@dataclass(frozen=True, slots=True)
class Rule:
    error_code: str
    message: str
    suggestions: tuple[str, ...]
    retryable: bool


# English defaults; keys are EMERGENCY_RULES (apps/engine/config/) in the same order.
DEFAULT_RULES: dict[str, Rule] = {
    "timeout": Rule(
        "timeout",
        "The task ran out of time before it finished.",
        (
            "Retry: a slow model or a slow command may have been a passing problem.",
            "Split the task into smaller steps, or raise react.max_wall_seconds / "
            "llm.timeout.read in agentkit.yaml.",
        ),
        True,
    ),
    "loop_detected": Rule(
        "loop_detected",
        "The agent kept repeating itself and was stopped.",
        (
            "Retry with the missing information, or describe a different approach.",
            "Split the task into smaller steps, or check that the tool arguments it needs exist.",
        ),
        True,
    ),
    "runaway_output": Rule(
        "runaway_output",
        "The model's replies kept running away (repeating themselves, or too slow) and were cut.",
        (
            "Retry; lower models.<alias>.max_tokens, or try a stronger model "
            "(manage.py check_llm --agent names the cause).",
        ),
        True,
    ),
    "max_steps": Rule(
        "max_steps_exceeded",
        "The agent used all its steps without an accepted final answer.",
        (
            "Split the task into smaller ones, or state more precisely what done means.",
            "Raise react.max_steps in agentkit.yaml if the task really needs more steps.",
        ),
        False,
    ),
    "llm_rate_limited": Rule(
        "llm_failure",
        "The model provider is rate-limiting requests right now.",
        (
            "Wait a minute, then retry.",
            "Configure llm.fallbacks in agentkit.yaml to use another model when this one is busy.",
        ),
        True,
    ),
    "llm_auth": Rule(
        "llm_failure",
        "The model provider refused the API key.",
        (
            "Check the key in the variable named by models.<alias>.api_key_env, and that it may "
            "use this model.",
            "Ask the administrator to fix the model configuration; retrying will not help.",
        ),
        False,
    ),
    "llm_bad_request": Rule(
        "llm_failure",
        "The model provider rejected the request (the prompt, the model name or the settings).",
        (
            "Start a new conversation if this one is long, or pick a model with a larger "
            "context window.",
            "Check the model name and the models / llm sections of agentkit.yaml.",
        ),
        False,
    ),
    "llm_outage": Rule(
        "llm_failure",
        "The model provider is unavailable or answered with a broken response.",
        (
            "Retry in a few minutes.",
            "Configure llm.fallbacks in agentkit.yaml to use another model during outages.",
        ),
        True,
    ),
    "verification_failed": Rule(
        "verification_failed",
        "The agent's final answer did not pass the workspace's checks.",
        (
            "Read the verification log in the task's events.",
            "Raise verification.max_reinjections to give the agent more attempts, or split "
            "the task.",
        ),
        False,
    ),
    "sandbox_unavailable": Rule(
        "sandbox_unavailable",
        "Verification could not run: no sandbox is available on the server.",
        (
            "Ask the administrator to run `python manage.py check_sandbox` and install bwrap.",
            "Retry once the sandbox works.",
        ),
        False,
    ),
    "internal_error": Rule(
        "internal_error",
        "agentkit failed while running this task.",
        ("This is a bug in agentkit: report it with the task id; the server log has the details.",),
        False,
    ),
}
assert tuple(DEFAULT_RULES) == EMERGENCY_RULES


@dataclass(frozen=True, slots=True)
class EmergencyError:
    """The structured end of a task the chain could not save."""

    error_code: str
    message: str
    suggestions: list[str] = field(default_factory=list)
    retryable: bool = False
    original_error: str = ""  # str() of the failure, for the task's owner only

    def to_dict(self) -> dict[str, Any]:
        return {
            "error_code": self.error_code,
            "message": self.message,
            "suggestions": list(self.suggestions),
            "retryable": self.retryable,
            "original_error": self.original_error,
        }

    def to_struct(self) -> ErrorStruct:
        """The wire shape of events and results: no original_error."""
        return ErrorStruct(
            error_code=self.error_code,
            message=self.message,
            suggestions=list(self.suggestions),
            retryable=self.retryable,
        )

    def to_error_message(self) -> str:
        """The human-readable form: the message, then the numbered suggestions."""
        if not self.suggestions:
            return self.message
        numbered = " ".join(f"{i}) {text}" for i, text in enumerate(self.suggestions, 1))
        return f"{self.message}\nSuggestions: {numbered}"


def _llm_rule(exc: llm.LLMError) -> str:
    if isinstance(exc, llm.LLMTimeoutError):
        return "timeout"
    if isinstance(exc, llm.RateLimitError):
        return "llm_rate_limited"
    if isinstance(exc, (llm.AuthenticationError, llm.LLMConfigurationError)):
        return "llm_auth"
    if isinstance(exc, llm.ContextWindowError):
        return "llm_bad_request"
    if isinstance(exc, llm.LLMStatusError):
        if exc.status_code in (401, 403):
            return "llm_auth"
        if exc.status_code == 429:
            return "llm_rate_limited"
        return "llm_outage" if exc.retryable else "llm_bad_request"
    if isinstance(exc, llm.ScriptExhaustedError):
        return "llm_bad_request"
    return "llm_outage"  # connection refused or cut, malformed stream, empty answers


def rule_for(exc: BaseException) -> str:
    """The rule name of a failure, by the type of the exception behind it."""
    if isinstance(exc, (flow.Cancelled, asyncio.CancelledError, GeneratorExit)):
        raise TypeError("cancellation is not classified: it propagates")
    if isinstance(exc, flow.Finished) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, flow.TimedOut | TimeoutError):
        return "timeout"
    if isinstance(exc, flow.LoopStopped):
        return "loop_detected"
    if isinstance(exc, flow.RunawayStopped):
        return "runaway_output"
    if isinstance(exc, flow.OutOfSteps):
        return "max_steps"
    if isinstance(exc, flow.VerificationFailed | flow.GaveUp):
        return "verification_failed"
    if isinstance(exc, flow.SandboxMissing | SandboxUnavailable):
        return "sandbox_unavailable"
    if isinstance(exc, llm.LLMError):
        return _llm_rule(exc)
    return "internal_error"


class EmergencyRules:
    @staticmethod
    def classify(exc: BaseException, config: FallbackChainConfig | None = None) -> EmergencyError:
        """The EmergencyError of a failure. Raises TypeError for a cancellation."""
        name = rule_for(exc)
        rule = DEFAULT_RULES[name]
        override = (config or FallbackChainConfig()).emergency.rules.get(name)
        message, suggestions, retryable = rule.message, list(rule.suggestions), rule.retryable
        if override is not None:
            message = override.message if override.message is not None else message
            if override.suggestions is not None:
                suggestions = list(override.suggestions)
            retryable = override.retryable if override.retryable is not None else retryable
        return EmergencyError(rule.error_code, message, suggestions, retryable, original(exc))


def original(exc: BaseException) -> str:
    """`Type: text` of the failure; for an engine outcome, its own error's message. Storable
    (llm/text.py): an endpoint's error text may hold NUL or a lone surrogate."""
    if isinstance(exc, flow.Finished):
        if exc.cause is not None:
            exc = exc.cause
        elif exc.error is not None:
            return storable(f"{exc.error.error_code}: {exc.error.message}")
    return storable(f"{type(exc).__name__}: {exc}")


_HOME = re.compile(r"/(?:home|Users)/[^/\s'\"]+")


def scrub(text: str, *, paths: Iterable[str] = (), secrets: Iterable[str] = ()) -> str:
    """`text` without the given secrets and internal paths (longest first), for the browser."""
    for secret in sorted({s for s in secrets if s and len(s) >= 6}, key=len, reverse=True):
        text = text.replace(secret, "[secret]")
    for path in sorted({p.rstrip("/") for p in paths if p and p != "/"}, key=len, reverse=True):
        text = text.replace(path, "<path>")
    return _HOME.sub("<home>", text)
