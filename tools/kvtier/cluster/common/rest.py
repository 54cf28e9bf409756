"""Plain JSON requests to the API server, authenticated from a kubeconfig by the official client.

The `kubernetes` client's typed models validate bodies with pydantic and drop what they do not know;
for CRDs, fake nodes and discovery we want the API server to see (and answer with) exactly the JSON we
mean, so this module sends and returns plain dicts through the client's own connection pool and auth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

__all__ = ["ApiException", "Rest"]


class Rest:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path | str | None = None, context: str | None = None) -> Rest:
        return cls(
            config.new_client_from_config(
                config_file=str(kubeconfig) if kubeconfig else None, context=context
            )
        )

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float = 30,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> Any:
        """JSON answer of `method path`; raises ApiException (with .status) for any 4xx/5xx."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        prepared = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(*prepared, _request_timeout=timeout)
        data = response.read()
        if not 200 <= response.status < 300:
            raise ApiException(
                status=response.status, reason=response.reason, body=data.decode(errors="replace")
            )
        text = data.decode()
        try:
            return json.loads(text) if text else None
        except json.JSONDecodeError:
            return text

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def find(self, path: str) -> Any:
        """The object at `path`, or None when it does not exist (404)."""
        try:
            return self.get(path)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
