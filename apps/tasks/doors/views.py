from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from apps.tasks.conf import agent_config
from apps.tasks.routing import RUNNABLE_MODES, max_message_chars
from apps.tasks.selectors import workspaces_for_user

# What a person sees for each mode: a name and one line on what it does (the chat's mode menu,
# the task headers, the empty page's examples).
MODE_LABELS = {
    "direct_chat": (
        "Answer",
        "One answer from the model: no tools, nothing in the workspace changes.",
    ),
    "react": ("Agent", "Reads, edits and runs code in the workspace, step by step."),
    "plan_exec": (
        "Plan & verify",
        "Writes a plan for your review, builds it in phases, then runs the tests.",
    ),
    "team_collab": ("Team", "A reviewed plan split between experts who work in phases."),
}


@login_required
def chat_page(request):
    config = agent_config()
    main = config.model_for()
    return render(
        request,
        "tasks/chat.html",
        {
            "workspaces": workspaces_for_user(user=request.user),
            "modes": [
                {
                    "value": m,
                    "label": MODE_LABELS.get(m, (m, ""))[0],
                    "description": MODE_LABELS.get(m, (m, ""))[1],
                }
                for m in RUNNABLE_MODES
            ],
            "mode_labels": {m: list(MODE_LABELS.get(m, (m, ""))) for m in RUNNABLE_MODES},
            "default_mode": config.modes.default,
            "skills": sorted(config.skills),
            "offline_model": main.provider == "scripted",
            "max_message_chars": max_message_chars(),
            "model_providers": {alias: m.provider for alias, m in sorted(config.models.items())},
            "allowed_roots": config.workspaces.allowed_roots,
            "upload_max_mb": config.workspaces.upload_max_mb,
        },
    )
