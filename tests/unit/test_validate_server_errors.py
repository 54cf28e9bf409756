"""`--server` with an API server that does not answer ends in a clear error naming it, never a traceback;
the tracing of a refused field to the values key that produced it."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from kvtier.cluster.common.rest import Rest
from kvtier.errors import UserError
from kvtier.validate.inputs import loader, provenance
from kvtier.validate.layers import server

ENV = """\
engine:
  port: 8000
cache:
  l2:
    eviction:
      schedule: 0 0 * * 7
models:
  - name: m
    resources:
      requests:
        cpu: '2'
        memory: 20Gi
"""


def test_an_api_server_that_does_not_answer_is_a_clear_error() -> None:
    configuration = client.Configuration(host="https://127.0.0.1:1")  # loopback, nothing listens
    configuration.retries = 0
    judge = server.Judge(Rest(client.ApiClient(configuration)), "kv", "context nowhere")
    loaded = loader.load_text(ENV, Path("env.yaml"))
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(UserError, match=r"the API server at https://127.0.0.1:1 did not answer"):
        server.judge(judge, [manifest], loaded, "env.yaml")


@pytest.mark.parametrize(
    ("field", "message", "manifest", "key"),
    [
        (
            "spec.schedule",
            'Invalid value: "0 0 * * 7": end of range (7) above maximum (6)',
            {"spec": {"schedule": "0 0 * * 7"}},
            ("cache", "l2", "eviction", "schedule"),
        ),
        (
            "spec.template.spec.containers[0].resources.requests",
            'Invalid value: "20Gi": must be less than or equal to memory limit of 8Gi',
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"resources": {"requests": {"cpu": "2", "memory": "20Gi"}}}]}
                    }
                }
            },
            ("models", 0, "resources", "requests", "memory"),
        ),
        (
            "spec.ports[0].port",
            "Invalid value: 8000: must be unique",
            {"spec": {"ports": [{"port": 8000}]}},
            ("engine", "port"),
        ),
        (
            "metadata.name",
            'Invalid value: "x_y": a lowercase RFC 1123 label',
            {"metadata": {"name": "x_y"}},
            None,
        ),
    ],
)
def test_a_refused_field_is_traced_to_its_values_key(
    field: str, message: str, manifest: dict, key: tuple | None
) -> None:
    loaded = loader.load_text(ENV, Path("env.yaml"))
    assert provenance.trace(field, message, manifest, loaded.data) == key
