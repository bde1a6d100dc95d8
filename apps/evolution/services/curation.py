"""What admins do with evolution artifacts (the admin actions call these)."""

from __future__ import annotations

from django.db import transaction

from apps.evolution.models import Pitfall, PitfallStatus, PromptStatus, PromptVersion
from apps.tasks.services import ApplicationError


def pitfall_set_status(*, pitfall: Pitfall, status: str) -> Pitfall:
    pitfall.status = status
    pitfall.save(update_fields=["status", "updated_at"])
    return pitfall


def pitfall_share(*, pitfall: Pitfall) -> Pitfall:
    if not pitfall.workspace.share_evolution:
        raise ApplicationError(
            f"workspace {pitfall.workspace.name!r} has not opted in to sharing; tick "
            "'share evolution' on the workspace first",
            {"pitfall": pitfall.pk},
        )
    pitfall.shared = True
    pitfall.save(update_fields=["shared", "updated_at"])
    return pitfall


def prompt_version_set_status(*, version: PromptVersion, status: str) -> PromptVersion:
    """Activating a version makes the target's previously active version `approved` again."""
    if status == PromptStatus.ACTIVE and version.status not in (
        PromptStatus.APPROVED,
        PromptStatus.ACTIVE,
    ):
        raise ApplicationError(
            f"prompt version {version.pk} is {version.status}: approve it before activating it",
            {"prompt_version": version.pk},
        )
    with transaction.atomic():
        if status == PromptStatus.ACTIVE:
            PromptVersion.objects.filter(
                workspace_id=version.workspace_id,
                target_kind=version.target_kind,
                target_name=version.target_name,
                status=PromptStatus.ACTIVE,
            ).exclude(pk=version.pk).update(status=PromptStatus.APPROVED)
        version.status = status
        version.save(update_fields=["status", "updated_at"])
    return version


PITFALL_ACTIONS = {
    "approve": PitfallStatus.ACTIVE,
    "activate": PitfallStatus.ACTIVE,
    "reject": PitfallStatus.RETIRED,
    "retire": PitfallStatus.RETIRED,
}
