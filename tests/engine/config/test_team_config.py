"""agentkit.yaml's team_collab sections (config/team.py): the default team, experts overriding
and extending it, templates, and clear errors for unknown templates, experts, tools and aliases."""

from __future__ import annotations

import pytest

from apps.engine.config import ConfigError, parse_config
from apps.engine.config.team import team_experts, team_templates


def test_default_team_is_planner_coder_reviewer_with_sensible_tools():
    cfg = parse_config({})
    experts = team_experts(cfg.experts)
    assert sorted(experts) == ["coder", "planner", "reviewer"]
    assert "str_replace_editor" in experts["coder"].tools
    assert "str_replace_editor" not in experts["planner"].tools
    assert "str_replace_editor" not in experts["reviewer"].tools
    assert team_templates(cfg.team, cfg.experts)["default"].experts == [
        "coder",
        "planner",
        "reviewer",
    ]
    assert cfg.team.max_concurrency == 2 and cfg.rollback.timeout_seconds == 120


def test_experts_override_and_extend_the_default_team():
    cfg = parse_config(
        {
            "experts": {
                "coder": {"system_prompt": "Only Rust.", "tools": ["read_file"]},
                "tester": {"system_prompt": "Write tests.", "start_phase": "building"},
            },
            "team": {"templates": {"qa": {"experts": ["tester", "reviewer"]}}, "template": "qa"},
        }
    )
    experts = team_experts(cfg.experts)
    assert experts["coder"].system_prompt == "Only Rust." and experts["coder"].tools == [
        "read_file"
    ]
    assert experts["tester"].start_phase == "building"
    assert sorted(team_templates(cfg.team, cfg.experts)) == ["default", "qa"]


def test_unknown_template_expert_tool_and_alias_are_refused_with_the_known_ones():
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "experts": {"coder": {"tools": ["hammer"], "model": "gpt9"}},
                "team": {"template": "frontend", "templates": {"qa": {"experts": ["tester"]}}},
            }
        )
    text = str(info.value)
    assert "experts.coder.tools.0: unknown tool 'hammer'" in text
    assert "experts.coder.model: unknown model alias 'gpt9'" in text
    assert (
        "team.templates.qa.experts.0: unknown expert 'tester' (known: coder, planner, reviewer)"
        in text
    )
    assert "team.template: unknown template 'frontend' (known: default, qa)" in text


def test_rollback_timeout_and_concurrency_must_be_positive():
    with pytest.raises(ConfigError) as info:
        parse_config({"rollback": {"timeout_seconds": 0}, "team": {"max_concurrency": 0}})
    assert "rollback.timeout_seconds" in str(info.value)
    assert "team.max_concurrency" in str(info.value)
