"""docs/deployment.md's operating section stays true (issue 41): every `agentkit_*` metric it
names is one the code exports, its Prometheus scrape config reads as Prometheus reads it (YAML,
the path and the bearer token), and its tracing block is the environment the code reads."""

from __future__ import annotations

import re

import pytest
import yaml
from prometheus_client import REGISTRY

from apps.tasks.ops import metrics
from tests.support import ROOT
from tests.test_deployment_doc import doc_blocks

DOC = ROOT / "docs" / "deployment.md"
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def exported() -> set[str]:
    names = set()
    for family in REGISTRY.collect():
        if family.name.startswith("agentkit_"):
            names.add(family.name)
    collected = {family.name for family in metrics.StateCollector().collect()}
    return names | collected


@pytest.mark.django_db
def test_every_metric_the_doc_names_is_exported():
    text = DOC.read_text()
    named = set(re.findall(r"\bagentkit_(?!site\b)[a-z_]+\b", text))  # not agentkit_site
    assert len(named) >= 12
    known = exported()
    for name in named:
        base = name
        for suffix in SUFFIXES:
            base = base.removesuffix(suffix)
        assert base in known, f"docs/deployment.md names {name}, which nothing exports"


def test_the_scrape_config_and_the_tracing_block_read_as_their_readers_do():
    blocks = doc_blocks(DOC)
    config = yaml.safe_load(blocks["prometheus"])
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert job["static_configs"][0]["targets"]
    tracing = blocks["tracing"]
    names = {
        line.split("=", 1)[0]
        for line in tracing.splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert names == {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"}
