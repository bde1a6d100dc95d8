"""Prompt versions at run time and their A/B test: only a version an admin approved or activated
reaches a prompt; `evolution.ab_share` of a target's tasks (stable hash of the task id) run the
approved candidate instead of the active version; outcomes (verification, reflections, tokens)
are recorded and compared in admin with their sample sizes. Promotion stays an admin action."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.evolution.models import PromptRun, PromptVersion
from apps.evolution.services.prompts import ab_sampled
from tests.evolution.conftest import GOAL, gives_up_config, restore_demo, run, shipped_with
from tests.fakes.llm_server import FakeLLMServer
from tests.tasks.factories import make_task

pytestmark = pytest.mark.django_db(transaction=True)


def version(workspace, text, status, target="react"):
    return PromptVersion.objects.create(
        workspace=workspace, target_kind="mode", target_name=target, text=text, status=status
    )


def test_ab_assignment_is_stable_per_task_and_close_to_the_share():
    first = [ab_sampled(task_id, 0.2) for task_id in range(1, 20_001)]
    assert first == [ab_sampled(task_id, 0.2) for task_id in range(1, 20_001)]
    assert 0.19 < sum(first) / len(first) < 0.21
    assert not any(ab_sampled(task_id, 0.0) for task_id in range(1, 500))


def system_prompt_of_a_react_task(user, workspace, config_file, ab_share: float):
    with FakeLLMServer(script=["Done."]) as server:
        entry = server.model_entry("openai")
        config_file(
            f"""
            models:
              main: {{provider: openai, model: {entry["model"]}, base_url: "{entry["base_url"]}"}}
            evolution: {{ab_share: {ab_share}}}
            """
        )
        task = make_task(user, workspace, goal="tidy the readme", mode="react")
        assert run(task) == "completed"
        system = server.requests[0].body["messages"][0]["content"]
    text = system if isinstance(system, str) else "".join(b["text"] for b in system)
    return task, text


def test_only_approved_versions_run_and_the_share_picks_the_candidate(demo, config_file):
    user, workspace = demo[0], demo[1]
    active = version(workspace, "ACTIVE-GUIDANCE: run pytest first.", "active")
    version(workspace, "PROPOSED-GUIDANCE: never shown.", "proposed")
    version(workspace, "REJECTED-GUIDANCE: never shown.", "rejected")
    version(workspace, "OTHER-MODE-GUIDANCE", "active", target="plan_exec")

    task, system = system_prompt_of_a_react_task(user, workspace, config_file, ab_share=1.0)
    assert "## Guidance approved for this workspace\nACTIVE-GUIDANCE" in system
    for never in ("PROPOSED-GUIDANCE", "REJECTED-GUIDANCE", "OTHER-MODE-GUIDANCE"):
        assert never not in system
    assert (task.prompt_run.version_id, task.prompt_run.arm) == (active.pk, "active")
    assert task.prompt_run.outcome == "completed"

    candidate = version(workspace, "CANDIDATE-GUIDANCE: read the test first.", "approved")
    task, system = system_prompt_of_a_react_task(user, workspace, config_file, ab_share=1.0)
    assert "CANDIDATE-GUIDANCE" in system and "ACTIVE-GUIDANCE" not in system
    assert (task.prompt_run.version_id, task.prompt_run.arm) == (candidate.pk, "candidate")

    task, system = system_prompt_of_a_react_task(user, workspace, config_file, ab_share=0.0)
    assert "ACTIVE-GUIDANCE" in system and "CANDIDATE-GUIDANCE" not in system
    candidate.refresh_from_db()
    assert candidate.status == "approved"  # running it never promotes it


def test_outcomes_are_recorded_and_compared_with_sample_sizes_in_admin(demo, config_file):
    user, workspace, root = demo
    active = version(workspace, "Read the failing test in full first.", "active", "plan_exec")
    config_file(gives_up_config())
    gave_up = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    assert run(gave_up) == "gave_up_after_reflections"
    record = PromptRun.objects.get(task=gave_up)
    assert (record.version_id, record.arm, record.outcome) == (
        active.pk,
        "active",
        "gave_up_after_reflections",
    )
    assert record.verification_passed is False and record.reflections == 1 and record.tokens > 0

    candidate = version(workspace, "State the rule, not the characters.", "approved", "plan_exec")
    restore_demo(root)
    config_file(shipped_with(ab=("ab_share: 0.0", "ab_share: 1.0")))
    passed = make_task(user, workspace, goal=GOAL, mode="plan_exec")
    assert run(passed) == "completed"
    record = PromptRun.objects.get(task=passed)
    assert (record.version_id, record.arm, record.verification_passed) == (
        candidate.pk,
        "candidate",
        True,
    )

    admin = get_user_model().objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(admin)
    page = client.get(f"/admin/evolution/promptversion/{candidate.pk}/change/").content.decode()
    assert f"<td>#{candidate.pk}</td><td>approved</td><td>1</td><td>1</td><td>1 / 1</td>" in page
    assert f"<td>#{active.pk}</td><td>active</td><td>1</td><td>0</td><td>0 / 1</td>" in page
