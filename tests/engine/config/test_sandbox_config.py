"""The `sandbox:` section of agentkit.yaml reaches the Sandbox: require, limits, what is shown."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from pydantic import ValidationError

from apps.engine.config import SandboxConfig, SandboxProperty
from apps.engine.sandbox import PROPERTIES, Limits, Sandbox, agentkit_root


def test_config_knows_exactly_the_properties_the_sandbox_checks():
    assert typing.get_args(SandboxProperty) == PROPERTIES
    assert tuple(SandboxConfig().require) == PROPERTIES  # default: everything must hold


def test_from_config_passes_limits_require_and_exposure(tmp_path):
    config = SandboxConfig(
        require=["no_network"],
        limits={"processes": 64, "address_space_mb": 1024, "tmp_size_mb": 32},
        installation_root=str(tmp_path),
        readable=["/opt/tools"],
        hidden=["/etc/myapp"],
    )
    box = Sandbox.from_config(config)
    assert box.require == ("no_network",)
    assert box.limits == Limits(processes=64, address_space_mb=1024, tmp_size_mb=32)
    assert box.exposure.installation_root == tmp_path.resolve()
    assert box.exposure.readable == (Path("/opt/tools"),)
    assert Path("/etc/myapp") in box.exposure.hidden_paths()
    assert Sandbox.from_config(SandboxConfig()).exposure.installation_root == agentkit_root()


def test_bad_sandbox_settings_are_refused_with_the_field_named():
    with pytest.raises(ValidationError, match="paths must be absolute"):
        SandboxConfig(readable=["relative/dir"])
    with pytest.raises(ValidationError, match="require"):
        SandboxConfig(require=["no_such_property"])
    with pytest.raises(ValidationError, match="processes"):
        SandboxConfig(limits={"processes": 1})


def test_the_shared_sandbox_is_made_once_per_configuration_object():
    config = SandboxConfig(mode="off", timeout_seconds=7)
    shared = Sandbox.shared(config)
    assert Sandbox.shared(config) is shared and shared.timeout_seconds == 7
    reloaded = SandboxConfig(mode="off", timeout_seconds=9)  # equal or not: a new object
    assert Sandbox.shared(reloaded) is not shared
    assert Sandbox.shared(reloaded).timeout_seconds == 9
    assert Sandbox.shared(reloaded) is Sandbox.shared(reloaded)
