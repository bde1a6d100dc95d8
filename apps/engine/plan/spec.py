"""The spec a planner drafts and a person reviews: phases with roles and dependencies, the commands
that verify the whole, acceptance criteria. Framework-free; `apps.specs` stores it through the ORM.

A spec is valid only when its phase ids are unique, every dependency names another phase of the
spec, and the dependencies have no cycle; `topological_layers()` then gives the phases in an order
that respects them, phases of one layer being independent of each other.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

PHASE_ID = r"^[a-z0-9][a-z0-9_-]{0,39}$"
SNAPSHOT = "@snapshot"  # rollback_command that restores the git snapshot taken before the phase
MAX_PHASES = 20

Command = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]


class PhaseSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, StringConstraints(pattern=PHASE_ID)]
    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    role: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=60)] = (
        "coder"
    )
    instructions: Annotated[str, StringConstraints(strip_whitespace=True, max_length=8000)] = ""
    depends_on: list[str] = Field(default_factory=list)
    validation_command: Command | None = None
    rollback_command: Command | None = None


class SpecDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=8000)]
    summary: Annotated[str, StringConstraints(strip_whitespace=True, max_length=4000)] = ""
    phases: list[PhaseSpec] = Field(min_length=1, max_length=MAX_PHASES)
    verification_commands: list[Command] = Field(default_factory=list)
    acceptance_criteria: list[
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1000)]
    ] = Field(default_factory=list)

    @model_validator(mode="after")
    def _dependencies_form_a_dag(self) -> SpecDraft:
        ids = [phase.id for phase in self.phases]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"phase ids must be unique; repeated: {', '.join(duplicates)}")
        known = set(ids)
        for phase in self.phases:
            unknown = [d for d in phase.depends_on if d not in known]
            if unknown:
                raise ValueError(
                    f"phase {phase.id!r} depends on unknown phase(s) {', '.join(unknown)}; "
                    f"known phases: {', '.join(ids)}"
                )
            if phase.id in phase.depends_on:
                raise ValueError(f"phase {phase.id!r} depends on itself")
        self.topological_layers()  # raises on a cycle
        return self

    def phase(self, phase_id: str) -> PhaseSpec:
        for phase in self.phases:
            if phase.id == phase_id:
                return phase
        raise KeyError(phase_id)

    def topological_layers(self) -> list[list[PhaseSpec]]:
        """Phases grouped in layers: each layer depends only on earlier layers; spec order within."""
        remaining = list(self.phases)
        done: set[str] = set()
        layers: list[list[PhaseSpec]] = []
        while remaining:
            layer = [p for p in remaining if all(d in done for d in p.depends_on)]
            if not layer:
                cycle = ", ".join(p.id for p in remaining)
                raise ValueError(f"phase dependencies form a cycle among: {cycle}")
            layers.append(layer)
            done.update(p.id for p in layer)
            remaining = [p for p in remaining if p.id not in done]
        return layers

    def dependents_of(self, phase_id: str) -> list[str]:
        """Every phase that depends on `phase_id`, directly or not, in spec order."""
        failed = {phase_id}
        changed = True
        while changed:
            changed = False
            for phase in self.phases:
                if phase.id not in failed and failed.intersection(phase.depends_on):
                    failed.add(phase.id)
                    changed = True
        return [p.id for p in self.phases if p.id in failed and p.id != phase_id]


def spec_review_id(spec_id: int | str) -> str:
    return f"{spec_id}:spec_review"


def parse_spec_review_id(value: object) -> int | None:
    """The spec id in a `<spec_id>:spec_review` string, or None when it is not one."""
    if not isinstance(value, str):
        return None
    match = re.fullmatch(r"([1-9][0-9]{0,17}):spec_review", value)
    return int(match.group(1)) if match else None
