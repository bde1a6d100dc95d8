"""`manage.py check_llm` as a real subprocess, against the fake LLM server and the scripted model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.fakes.llm_server import FakeLLMServer
from tests.support import ROOT, free_port, server_env

pytestmark = pytest.mark.slow  # spawns processes: started early (tests/conftest.py)

KEY = "sk-check-llm-secret-123"


@pytest.fixture(scope="module")
def llm_server():
    script = [{"text": "Hi, I am the fake model.", "repeat": True}]
    with FakeLLMServer(script, ttft=0.05, api_key=KEY) as server:
        yield server


def check_llm(tmp_path: Path, config: dict, *args: str, **env: str):
    path = tmp_path / "agentkit.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "manage.py", "check_llm", *args],
        cwd=ROOT,
        env=server_env(tmp_path, AGENTKIT_CONFIG=str(path), **env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_models(server: FakeLLMServer) -> dict:
    return {
        "models": {
            "gpt": server.model_entry(
                "openai", model="gpt-fake", api_key_env="CHECK_LLM_KEY", price={"input": 1}
            ),
            "claude": server.model_entry(
                "anthropic", model="claude-fake", api_key_env="CHECK_LLM_KEY"
            ),
        },
        "llm": {"main": "gpt"},
    }


def test_reports_reply_usage_and_latency_for_every_alias_as_json(tmp_path, llm_server):
    result = check_llm(tmp_path, fake_models(llm_server), "--json", CHECK_LLM_KEY=KEY)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    by_alias = {entry["alias"]: entry for entry in report["models"]}
    assert sorted(by_alias) == ["claude", "gpt"]
    for entry in by_alias.values():
        assert entry["content"] == "Hi, I am the fake model."
        assert entry["usage"]["input_tokens"] > 0
        assert "cache_read_tokens" in entry["usage"]
        assert 50 <= entry["first_token_ms"] <= entry["latency_ms"]
    assert by_alias["gpt"]["cost"] > 0
    assert KEY not in result.stdout + result.stderr


def test_text_report_names_each_alias_with_cached_tokens_and_first_token_time(tmp_path, llm_server):
    result = check_llm(tmp_path, fake_models(llm_server), "--model", "claude", CHECK_LLM_KEY=KEY)
    assert result.returncode == 0, result.stderr
    assert "claude (anthropic claude-fake) ... ok" in result.stdout
    assert "gpt" not in result.stdout
    assert "reply    Hi, I am the fake model." in result.stdout
    assert "cached 0" in result.stdout and "first token" in result.stdout


def test_offline_scripted_model_answers(tmp_path):
    result = check_llm(tmp_path, {"models": {"main": {"provider": "scripted"}}})
    assert result.returncode == 0, result.stderr
    assert "main (scripted scripted-demo) ... ok" in result.stdout
    assert "offline scripted model" in result.stdout


def test_missing_api_key_is_a_clear_message_and_a_failing_exit(tmp_path, llm_server):
    config = fake_models(llm_server)
    config["models"]["local"] = {"provider": "scripted"}
    result = check_llm(tmp_path, config)  # CHECK_LLM_KEY not set
    assert result.returncode == 1
    assert "environment variable CHECK_LLM_KEY is not set" in result.stdout
    assert "local (scripted scripted-demo) ... ok" in result.stdout
    assert "2 of 3 model aliases failed: claude, gpt" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_unreachable_endpoint_is_a_clear_message_and_a_failing_exit(tmp_path):
    config = {
        "models": {
            "main": {"provider": "openai", "base_url": f"http://127.0.0.1:{free_port()}/v1"}
        },
        "llm": {"retries": {"max_attempts": 1}},
    }
    result = check_llm(tmp_path, config, "--json")
    assert result.returncode == 1
    (entry,) = json.loads(result.stdout)["models"]
    assert entry["error_type"] == "LLMConnectionError"
    assert "Check models.main.base_url" in entry["error"]
    assert "Traceback" not in result.stderr


def test_unknown_alias_and_invalid_config_are_refused_without_traceback(tmp_path):
    result = check_llm(tmp_path, {"models": {"main": {"provider": "scripted"}}}, "--model", "x")
    assert result.returncode == 1
    assert "unknown model alias 'x'; configured: main" in result.stderr
    broken = check_llm(tmp_path, {"models": {"main": {"provider": "gemini"}}})
    assert broken.returncode == 1
    assert "models.main.provider" in broken.stderr and "Traceback" not in broken.stderr


# ── check_llm --agent (issue 28) ───────────────────────────────────────────────────────────────
FIX = [
    {
        "text": "Reading the code.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "calc.py"}}],
    },
    {
        "tool_calls": [
            {
                "name": "str_replace_editor",
                "arguments": {
                    "command": "str_replace",
                    "path": "calc.py",
                    "old_str": "(len(values) + 1)",
                    "new_str": "len(values)",
                },
            }
        ],
        "after_tool": "read_file",
    },
    {"tool_calls": [{"name": "run_tests", "arguments": {}}], "after_tool": "str_replace_editor"},
    {"text": "Fixed: average divided by one too many.", "after_tool": "run_tests"},
]
TEXT_ONLY = [
    {"text": "The divisor should be len(values); change it and the test passes.", "repeat": True}
]
BAD_ARGUMENTS = [
    {
        "tool_calls": [
            {"name": "str_replace_editor", "arguments": {"file": "calc.py", "fix": "len"}}
        ],
        "repeat": True,
        "match": "^(?!ERROR)",
    },
    {"text": "I could not edit the file.", "repeat": True},
]


def agent_config(server: FakeLLMServer, provider: str) -> dict:
    return {
        "models": {
            "main": server.model_entry(
                provider, model="agent-fake", price={"input": 2, "output": 8}
            ),
        },
        "llm": {"main": "main", "retries": {"max_attempts": 1}},
    }


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_agent_check_passes_when_the_model_fixes_the_bug_with_valid_tool_calls(tmp_path, provider):
    with FakeLLMServer(FIX) as server:
        result = check_llm(tmp_path, agent_config(server, provider), "--agent")
        sent = [request.body for request in server.requests]
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "agent check on main" in out
    assert (
        "tools called   yes — 3 call(s) (read_file, str_replace_editor, run_tests), all with valid arguments"
        in out
    )
    assert "bug fixed      yes" in out
    assert "test passes    yes (pytest -q test_calc.py: 1 passed" in out
    assert "run            completed in 4 step(s)" in out
    assert "cost           input " in out and "$0.0" in out
    assert "PASS: main works as an agent here." in out
    assert "step 1: calls read_file" in out and "step 2: calls str_replace_editor" in out
    # each call shown as it streamed, then its step with the call's speed
    assert '[tool call] read_file {"path": "calc.py"}' in out
    measure = r"\d+ tokens in [\d.]+ s: the first after [\d.]+ s, then [\d.]+ tokens/s"
    assert re.search(rf"step 1: calls read_file \({measure}\)", out)
    assert "tool_choice    recommended: auto" in out
    assert len(sent) == 4  # the engine's calls went to the fake, nothing else


def test_agent_check_reports_a_model_that_never_calls_tools(tmp_path):
    with FakeLLMServer(TEXT_ONLY) as server:
        result = check_llm(tmp_path, agent_config(server, "openai"), "--agent", "--json")
    assert result.returncode != 0
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["tool_calls"] == [] and report["fixed"] is False
    assert report["test_passed"] is False
    assert report["status"] == "completed"
    assert report["problems"][0].startswith("The model never called a tool")
    assert "never called a tool" in result.stderr  # the CommandError says it too
    assert report["recommended_tool_choice"] == "required"
    assert report["stopped_because"].startswith("no tool call")
    assert "models.main.tool_choice: required" in report["stopped_because"]
    assert report["tokens_per_second"] > 0


def test_agent_check_names_a_rambling_model_as_the_cause(tmp_path):
    ramble = [{"text": "Let me see:\n" + "#\n" * 60, "repeat": True}]
    with FakeLLMServer(ramble) as server:
        result = check_llm(tmp_path, agent_config(server, "openai"), "--agent")
    assert result.returncode != 0
    out = result.stdout
    assert "step 1: runaway_output" in out  # streamed as it happened
    assert "stopped        rambling" in out and "'#'" in out
    assert "tool_choice    recommended: required" in out


def test_agent_check_reports_invalid_tool_arguments(tmp_path):
    with FakeLLMServer(BAD_ARGUMENTS) as server:
        result = check_llm(tmp_path, agent_config(server, "anthropic"), "--agent")
    assert result.returncode != 0
    out = result.stdout
    assert "some with INVALID arguments" in out
    assert "invalid: str_replace_editor: schema_mismatch" in out
    assert "bug fixed      NO" in out
    assert "FAIL: " in out and "tool calls had invalid arguments" in out
    assert "PASS" not in out


def test_agent_check_on_the_offline_scripted_model_says_to_configure_a_real_one(tmp_path):
    result = check_llm(tmp_path, {"models": {"main": {"provider": "scripted"}}}, "--agent")
    assert result.returncode != 0
    assert "main is the offline scripted model" in result.stdout
    assert "Connect a real model" in result.stdout


def test_reports_the_structured_output_path_the_alias_uses(tmp_path):
    answer = json.dumps({"answer": "Paris"})
    with FakeLLMServer(
        [{"text": answer, "repeat": True}],
        json_schema_supported=False,
        json_schema_refusal_status=500,
    ) as server:
        config = {"models": {"local": server.model_entry("openai")}, "llm": {"main": "local"}}
        result = check_llm(tmp_path, config, "--json")
        assert result.returncode == 0, result.stderr
        (entry,) = json.loads(result.stdout)["models"]
        assert entry["structured_output"] == "tool"  # json_schema refused with a 500 naming it
        bodies = [r.body for r in server.requests if r.protocol == "openai"]
        assert sum("response_format" in body for body in bodies) == 1  # never retried
        text = check_llm(tmp_path, config)
        assert "structured output  tool" in text.stdout


# About 250 tokens of text that never repeats, streamed at 20 tokens/s (12 s): every step is cut by
# a 3 s step wall limit long before the text ends.
SLOW_WORDS = " ".join(f"pondering{i} the average and its divisor;" for i in range(100))


def test_agent_check_streams_the_model_s_text_while_the_step_runs_and_names_slowness(tmp_path):
    """The streamed text is printed as it arrives, well before the step's own line (the cut);
    the cause names the speed measured and the step's wall limit."""
    config = {
        "models": {"main": {"provider": "openai", "model": "slow-fake"}},
        "llm": {"main": "main", "retries": {"max_attempts": 1}},
        "react": {"step_wall_seconds": 3},
    }
    seen: list[tuple[float, bytes]] = []
    with FakeLLMServer([{"text": SLOW_WORDS, "repeat": True}], tokens_per_second=20) as server:
        config["models"]["main"]["base_url"] = server.openai_base_url
        path = tmp_path / "agentkit.yaml"
        path.write_text(yaml.safe_dump(config))
        process = subprocess.Popen(
            [sys.executable, "manage.py", "check_llm", "--agent"],
            cwd=ROOT,
            env=server_env(tmp_path, AGENTKIT_CONFIG=str(path)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

        def read() -> None:  # each piece of output with the time it came
            while piece := os.read(process.stdout.fileno(), 65536):
                seen.append((time.monotonic(), piece))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            process.wait(timeout=90)
        finally:
            process.kill()
            reader.join(timeout=10)
            stderr = process.stderr.read().decode()
            process.stderr.close()
            process.stdout.close()

    def first(text: str) -> float:
        so_far = b""
        for at, piece in seen:
            so_far += piece
            if text.encode() in so_far:
                return at
        raise AssertionError(f"{text!r} never printed: {so_far.decode()}\n{stderr}")

    out = b"".join(piece for _, piece in seen).decode()
    assert process.returncode != 0
    assert "model> pondering0 the average" in out  # the model's own words, streamed
    # printed as it came, not with the step's line: the first word came within a second or so
    # of the 3 s step's start (on a busy machine, 1.5 s left only 0.6 s between them)
    assert first("step 1: runaway_output") - first("pondering0") >= 1.0
    stopped = next(line for line in out.splitlines() if line.startswith("  stopped"))
    assert "too slow" in stopped and "tokens/s" in stopped
    assert "3 s (react.step_wall_seconds)" in stopped
    assert re.search(r"\(the first after \d+ s\), [\d.]+ tokens/s", stopped)  # prompt, then text
    assert "tool_choice    recommended: required" in out


def test_agent_check_out_of_time_names_the_speed_and_counts_the_cut_call(tmp_path):
    """The run's own wall time ends it mid-reply: the cause says so with the speed measured and
    the step's limit (not just `wall_time_exceeded`), and the cut call's tokens are counted."""
    config = {
        "models": {"main": {"provider": "openai", "model": "slow-fake"}},
        "llm": {"main": "main", "retries": {"max_attempts": 1}},
        "react": {"step_wall_seconds": 60, "max_wall_seconds": 2},
    }
    script = [{"text": SLOW_WORDS, "repeat": True}]
    with FakeLLMServer(script, tokens_per_second=20, usage_block=False) as server:
        config["models"]["main"]["base_url"] = server.openai_base_url
        result = check_llm(tmp_path, config, "--agent", "--json")
    report = json.loads(result.stdout)
    assert result.returncode != 0 and report["status"] == "failed"
    cause = report["stopped_because"]
    assert cause.startswith("too slow: the check's 2 s ran out"), cause
    assert re.search(r"then [\d.]+ tokens/s", cause)
    assert "one step may take 60 s (react.step_wall_seconds)" in cause
    assert report["tokens_per_second"] > 5
    assert report["usage"]["output_tokens"] > 0 and report["usage"]["estimated"] is True
