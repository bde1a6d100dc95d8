"""agentkit.yaml validation: readable, one line per bad field, naming its YAML path."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apps.engine.config import ConfigError, load_config, parse_config
from tests.support import ROOT


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentkit.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_shipped_config_is_valid_and_offline():
    config = load_config(ROOT / "agentkit.yaml")
    assert config.model_for().provider == "scripted"
    assert config.verification_enabled("plan_exec") is True
    assert config.verification_enabled("react") is False


def test_empty_file_gives_working_offline_defaults(tmp_path):
    config = load_config(write(tmp_path, ""))
    assert config.llm.main == "main"
    assert config.models["main"].provider == "scripted"
    assert config.streaming.flush_interval_ms == 50
    assert config.verification.max_reinjections == 1


def test_wrong_type_names_the_yaml_path(tmp_path):
    path = write(tmp_path, "react:\n  max_steps: lots\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert len(info.value.lines) == 1
    assert info.value.lines[0].startswith("react.max_steps: ")
    assert "'lots'" in info.value.lines[0]


def test_unknown_provider_lists_the_valid_ones(tmp_path):
    path = write(tmp_path, "models:\n  main:\n    provider: gemini\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (line,) = info.value.lines
    assert line.startswith("models.main.provider: got 'gemini'")
    assert "'openai'" in line and "'anthropic'" in line and "'scripted'" in line


def test_missing_alias_is_reported_with_known_aliases(tmp_path):
    path = write(
        tmp_path,
        """
        llm:
          main: gpt
          fallbacks: {main: [local]}
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.lines == [
        "llm.main: unknown model alias 'gpt' (known: main)",
        "llm.fallbacks.main.0: unknown model alias 'local' (known: main)",
    ]


def test_every_bad_field_gets_its_own_line(tmp_path):
    path = write(
        tmp_path,
        """
        streaming: {flush_interval_ms: -5}
        executor: {kind: celery}
        sandbox: {moed: off}
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    paths = sorted(line.split(":")[0] for line in info.value.lines)
    assert paths == ["executor.kind", "sandbox.moed", "streaming.flush_interval_ms"]


def test_limits_answer_chars_defaults_to_200000_and_must_be_positive(tmp_path):
    assert load_config(write(tmp_path, "")).limits.answer_chars == 200_000
    assert load_config(ROOT / "agentkit.yaml").limits.answer_chars == 200_000
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, "limits: {answer_chars: 0}\n"))
    assert [line.split(":")[0] for line in info.value.lines] == ["limits.answer_chars"]


def test_openai_provider_without_base_url_says_what_to_set(tmp_path):
    with pytest.raises(ConfigError) as info:
        parse_config({"models": {"main": {"provider": "openai", "model": "x"}}})
    assert "base_url" in str(info.value)


def test_thinking_budget_is_for_anthropic_and_below_max_tokens():
    ok = parse_config(
        {"models": {"main": {"provider": "anthropic", "max_tokens": 8000, "thinking_budget": 4000}}}
    )
    assert ok.models["main"].thinking_budget == 4000
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "models": {
                    "main": {
                        "provider": "openai",
                        "base_url": "http://x/v1",
                        "thinking_budget": 2000,
                    }
                }
            }
        )
    assert "anthropic" in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_config({"models": {"main": {"provider": "anthropic", "thinking_budget": 4096}}})
    assert "must be less than max_tokens" in str(info.value)


def test_structured_output_json_schema_is_refused_for_anthropic():
    with pytest.raises(ConfigError) as info:
        parse_config(
            {"models": {"main": {"provider": "anthropic", "structured_output": "json_schema"}}}
        )
    assert "use tool" in str(info.value)
    cfg = parse_config({"models": {"main": {"provider": "anthropic", "structured_output": "tool"}}})
    assert cfg.models["main"].structured_output == "tool"


def test_unknown_tool_in_a_skill_is_refused():
    with pytest.raises(ConfigError) as info:
        parse_config({"skills": {"coder": {"tools": ["read_file", "rm_rf"]}}})
    assert info.value.lines[0].startswith("skills.coder.tools.1: unknown tool 'rm_rf'")


def test_yaml_syntax_error_gives_line_and_column(tmp_path):
    path = write(tmp_path, "react:\n  max_steps: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "line " in info.value.lines[0] and "column " in info.value.lines[0]


def test_missing_file_says_how_to_fix(tmp_path):
    with pytest.raises(ConfigError, match="AGENTKIT_CONFIG"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("react:\n  max_steps: lots\n", "react.max_steps"),
        ("models:\n  main:\n    provider: gemini\n", "models.main.provider: got 'gemini'"),
        ("llm:\n  main: nowhere\n", "llm.main: unknown model alias 'nowhere'"),
    ],
)
def test_manage_py_check_fails_readably(tmp_path, yaml_text, expected):
    path = write(tmp_path, yaml_text)
    proc = manage_check(path)
    assert proc.returncode != 0
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr


def test_manage_py_check_passes_on_shipped_config():
    proc = manage_check()
    assert proc.returncode == 0, proc.stderr


def manage_check(config_path=None) -> subprocess.CompletedProcess:
    env = _clean_env()
    if config_path is not None:
        env["AGENTKIT_CONFIG"] = str(config_path)
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _clean_env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("AGENTKIT_CONFIG", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def test_bare_yaml_off_turns_the_sandbox_off(tmp_path):
    config = load_config(write(tmp_path, "sandbox:\n  mode: off\n"))
    assert config.sandbox.mode == "off"
    with pytest.raises(ConfigError, match=r"sandbox\.mode"):
        load_config(write(tmp_path, "sandbox:\n  mode: on\n"))


def test_required_sandbox_without_a_usable_backend_fails_manage_py_check(tmp_path):
    path = write(tmp_path, "sandbox:\n  mode: required\n  backends: []\n")
    proc = manage_check(path)
    assert proc.returncode != 0
    assert "sandbox.mode is 'required'" in proc.stderr and "bubblewrap" in proc.stderr
    works = write(tmp_path, "sandbox:\n  mode: required\n")
    ok = manage_check(works)
    assert ok.returncode == 0, ok.stderr
