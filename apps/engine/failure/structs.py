"""The structs the engine itself ends a run with: the errors of a run without the failure chain
(an engine built without `fallback`), what Recovery reflects on, and what Emergency's rules
(fallback.py) turn into their codes. `retryable` means running the same task again may well
succeed, not that the engine retries it."""

from __future__ import annotations

from apps.engine.events import ErrorStruct
from apps.engine.llm import errors as llm
from apps.engine.llm.text import storable
from apps.engine.loop.detection import LoopVerdict


def max_steps_exceeded(max_steps: int) -> ErrorStruct:
    return ErrorStruct(
        error_code="max_steps_exceeded",
        message=f"Stopped after {max_steps} steps without an accepted final answer.",
        suggestions=[
            "Raise react.max_steps in agentkit.yaml if the task really needs more steps.",
            "Split the task into smaller ones, or state more precisely what done means.",
        ],
    )


def wall_time_exceeded(seconds: float) -> ErrorStruct:
    return ErrorStruct(
        error_code="wall_time_exceeded",
        message=f"Stopped after the wall-time limit of {seconds:g} s.",
        suggestions=[
            "Raise react.max_wall_seconds in agentkit.yaml, or split the task.",
            "Check for a tool call that hangs (a command waiting for input, a server in the "
            "foreground).",
        ],
    )


def loop_detected(verdict: LoopVerdict) -> ErrorStruct:
    return ErrorStruct(
        error_code="loop_detected",
        message=f"Stopped: the agent kept looping ({verdict.pattern}) after a recovery hint. "
        f"{verdict.message}",
        suggestions=[
            "Rephrase the task with the missing information, or a different approach.",
            "Try a stronger model for this task.",
        ],
    )


def loop_suspected(verdict: LoopVerdict) -> ErrorStruct:
    return ErrorStruct(
        error_code="loop_suspected",
        message=f"The agent looks stuck ({verdict.pattern}); it was told so and may recover.",
        retryable=True,
    )


def verification_failed(attempts: int, errors: list[str]) -> ErrorStruct:
    first = errors[0] if errors else "the verifier reported a failure without details"
    return ErrorStruct(
        error_code="verification_failed",
        message=f"The final answer failed verification {attempts} time(s); first error: {first}",
        suggestions=[
            "Read the verification log in the task result.",
            "Raise verification.max_reinjections to give the agent more attempts.",
        ],
    )


def cancelled(reason: str) -> ErrorStruct:
    return ErrorStruct(error_code="cancelled", message=reason, retryable=True)


def interrupted() -> ErrorStruct:
    return ErrorStruct(
        error_code="interrupted",
        message="The run stopped before it finished: its consumer closed the event stream or "
        "its asyncio task was cancelled.",
        retryable=True,
    )


def engine_bug(exc: BaseException) -> ErrorStruct:
    return ErrorStruct(
        error_code="engine_error",
        message=storable(f"Internal error: {type(exc).__name__}: {exc}"),
        suggestions=["This is a bug in agentkit; the server log has the traceback."],
    )


# Most specific class first.
_LLM_FAILURES: tuple[tuple[type[llm.LLMError], str, str], ...] = (
    (
        llm.AuthenticationError,
        "llm_authentication_failed",
        "Check the key in the variable named by models.<alias>.api_key_env and that it may use "
        "this model.",
    ),
    (llm.RateLimitError, "llm_rate_limited", "Wait a moment and retry, or set llm.fallbacks."),
    (
        llm.ContextWindowError,
        "context_overflow",
        "The conversation was compressed once and still did not fit: start a new conversation, "
        "set models.<alias>.context_window to the server's real window, or pick a model with a "
        "larger context window.",
    ),
    (
        llm.LLMTimeoutError,
        "llm_timeout",
        "Retry; if it persists raise llm.timeout.read or check the endpoint.",
    ),
    (
        llm.LLMConnectionError,
        "llm_connection_error",
        "Check that the model's base_url is reachable, then retry.",
    ),
    (llm.LLMStatusError, "llm_status_error", "Check the endpoint's status and the model name."),
    (
        llm.LLMConfigurationError,
        "llm_configuration_error",
        "Fix the models / llm sections of agentkit.yaml or the environment.",
    ),
    (
        llm.ScriptExhaustedError,
        "llm_script_exhausted",
        "Add a turn to the scripted model's script that answers this call.",
    ),
    (llm.EmptyResponseError, "llm_empty_response", "Retry, or try another model."),
)


def from_llm_error(exc: llm.LLMError) -> ErrorStruct:
    code, hint = "llm_error", "Retry, or check the model configuration."
    for cls, known_code, known_hint in _LLM_FAILURES:
        if isinstance(exc, cls):
            code, hint = known_code, known_hint
            break
    return ErrorStruct(  # the endpoint's error text may hold NUL or a lone surrogate
        error_code=code, message=storable(str(exc)), suggestions=[hint], retryable=exc.retryable
    )


def sandbox_unavailable(exc: BaseException) -> ErrorStruct:
    """Verification could not run: no sandbox backend works here (an environment problem)."""
    from apps.engine.sandbox import INSTALL_HINT

    detail = str(exc) or INSTALL_HINT
    suggestions = [detail] if detail == INSTALL_HINT else [detail, INSTALL_HINT]
    return ErrorStruct(
        error_code="sandbox_unavailable",
        message="Verification could not run: no sandbox is available to run the workspace's "
        "checks in.",
        suggestions=[*suggestions, "`python manage.py check_sandbox` shows what was tried."],
        retryable=True,
    )


def gave_up_after_reflections(reflections: int, errors: list[str]) -> ErrorStruct:
    first = errors[0] if errors else "the verifier reported a failure without details"
    return ErrorStruct(
        error_code="gave_up_after_reflections",
        message=f"Verification still failed after {reflections} reflection(s); first error: "
        f"{first}",
        suggestions=[
            "Read the verification log and the reflections in the task's events.",
            "Raise reflexion.max_reflections (and plan_exec.phase_budgets.reflect) for more "
            "attempts, or split the task.",
        ],
    )
