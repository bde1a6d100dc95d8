from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from apps.tasks.conf import agent_config
from apps.tasks.selectors import workspaces_for_user
from apps.tasks.services import RUNNABLE_MODES, max_message_chars


@login_required
def chat_page(request):
    config = agent_config()
    main = config.model_for()
    return render(
        request,
        "tasks/chat.html",
        {
            "workspaces": workspaces_for_user(user=request.user),
            "modes": RUNNABLE_MODES,
            "default_mode": config.modes.default,
            "skills": sorted(config.skills),
            "offline_model": main.provider == "scripted",
            "max_message_chars": max_message_chars(),
            "model_providers": {alias: m.provider for alias, m in sorted(config.models.items())},
            "allowed_roots": config.workspaces.allowed_roots,
            "upload_max_mb": config.workspaces.upload_max_mb,
        },
    )
