"""MCP tool names and globs in skills' `tools:` and plan_exec's phase whitelists: accepted by the
config when they name a configured server, enforced by the phase gate, expanded for a skill."""

from __future__ import annotations

import pytest

from apps.engine.config import ConfigError, parse_config
from apps.engine.task import AgentTask
from tests.engine.helpers import HookRecorder, collect, of_type, scripted_engine
from tests.engine.plan.plan_exec_support import PASS, Outcomes, call, tools_in, turn
from tests.tools.mcp.conftest import git_server, time_server

SERVERS = {"time": time_server(), "git": {"command": "mcp-server-git"}}


def test_skills_and_whitelists_accept_names_and_globs_of_configured_servers():
    config = parse_config(
        {
            "mcp_servers": SERVERS,
            "skills": {"ops": {"system_prompt": "x", "tools": ["read_file", "git__*"]}},
            "plan_exec": {"whitelists": {"planning": ["read_file", "time__get_current_time"]}},
        }
    )
    assert config.skills["ops"].tools == ["read_file", "git__*"]


@pytest.mark.parametrize(
    "data, expected",
    [
        ({"skills": {"s": {"system_prompt": "x", "tools": ["jira__*"]}}}, "skills.s.tools.0"),
        ({"plan_exec": {"whitelists": {"planning": ["jira__search"]}}}, "whitelists.planning.0"),
        ({"mcp_servers": {"a__b": {"command": "x"}}}, "mcp_servers.a__b"),
        ({"mcp_servers": {"a": {"transport": "stdio"}}}, "needs `command`"),
        ({"mcp_servers": {"a": {"transport": "streamable_http"}}}, "needs `url`"),
        (
            {"mcp_servers": {"a": {"command": "x", "env": ["sk-123 secret"]}}},
            "environment variable",
        ),
    ],
)
def test_bad_mcp_references_and_servers_are_refused_with_their_path(data, expected):
    with pytest.raises(ConfigError) as info:
        parse_config({"mcp_servers": {"time": time_server()}, **data})
    assert expected in str(info.value)


async def test_a_whitelisted_phase_cannot_call_a_non_whitelisted_mcp_tool(
    servers, git_repo, tmp_path
):
    _, mcp, down = servers(time=time_server(), git=git_server(git_repo))
    assert down == {}
    turns = [
        turn(call("git__git_status", repo_path=str(git_repo))),
        turn(call("time__get_current_time", timezone="UTC"), after_tool="git__git_status"),
        "Done.",
    ]
    cfg = parse_config(
        {
            "mcp_servers": {"time": time_server(), "git": git_server(git_repo)},
            "streaming": {"flush_interval_ms": 0},
            "plan_exec": {"whitelists": {"planning": ["read_file", "time__*"]}},
        }
    )
    engine, _ = scripted_engine(
        turns,
        tools=[*tools_in(tmp_path), *(mcp.get(n) for n in mcp.names())],
        cfg=cfg,
        verifier=Outcomes(PASS),
        hooks=HookRecorder(),
    )
    events = await collect(engine, AgentTask(task_id=1, goal="status", mode="plan_exec"))
    violation = of_type(events, "phase_violation")[0].data
    assert violation["tool"] == "git__git_status" and violation["phase"] == "planning"
    results = [(r.data["name"], r.data["ok"]) for r in of_type(events, "tool_result")]
    assert results == [("git__git_status", False), ("time__get_current_time", True)]


async def test_a_skill_glob_offers_the_servers_tools_and_nothing_else(servers, tmp_path):
    _, mcp, _ = servers(time=time_server())
    cfg = parse_config({"mcp_servers": SERVERS, "streaming": {"flush_interval_ms": 0}})
    engine, model = scripted_engine(
        ["Hello."], tools=[*tools_in(tmp_path), *(mcp.get(n) for n in mcp.names())], cfg=cfg
    )
    task = AgentTask(task_id=1, goal="hi", mode="react", tools=("git__*", "read_file", "time__*"))
    events = await collect(engine, task)
    offered = sorted(t.name for t in model.requests[0].tools)
    assert offered == ["read_file", "time__convert_time", "time__get_current_time"]
    assert events[0].data["unavailable_tools"] == ["git__*"]


def test_the_commented_example_in_the_shipped_agentkit_yaml_is_valid():
    import yaml

    from tests.support import ROOT

    text = (ROOT / "agentkit.yaml").read_text()
    block = text.split("mcp_servers: {}\n", 1)[1]
    lines = ["mcp_servers:", *(line[1:] for line in block.splitlines() if line.startswith("#  "))]
    config = parse_config(yaml.safe_load("\n".join(lines)))
    assert sorted(config.mcp_servers) == ["git", "time", "tracker"]
    assert config.mcp_servers["tracker"].headers == {"Authorization": "TRACKER_AUTH"}
