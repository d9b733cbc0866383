"""Which handler serves which api key on one listener, and the ApiVersions table it advertises.

A node declares its table (kafkawire.api_versions) and routes a handler to every key in it;
`service()` refuses a table with an unrouted key, so ApiVersions advertises exactly what is
implemented (ARCHITECTURE.md "Wire protocol"). ApiVersions itself is answered here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kafkawire.api_keys import ApiKey
from kafkawire.api_versions import ApiFeatures, VersionRange, api_versions_response
from kafkawire.connection import KafkaRequestContext, KafkaService
from kafkawire.messages import KafkaRequest

# A handler gets the kio body, its version and the context; it returns the kio response of that
# version, or None for no response (acks=0).
Handler = Callable[[Any, int, KafkaRequestContext], Awaitable[Any | None]]


class KafkaRouter:
    def __init__(
        self,
        table: Mapping[ApiKey, VersionRange],
        features: Callable[[], ApiFeatures] | None = None,
    ) -> None:
        self.table = table
        self.features = features  # ApiVersions' finalized features, read at each request
        self._handlers: dict[int, Handler] = {int(ApiKey.API_VERSIONS): self._api_versions}

    def route(self, api_key: ApiKey, handler: Handler) -> None:
        if api_key not in self.table:
            raise ValueError(f"{api_key.name} is not in this listener's ApiVersions table")
        if int(api_key) in self._handlers and api_key != ApiKey.API_VERSIONS:
            raise ValueError(f"{api_key.name} is already routed")
        self._handlers[int(api_key)] = handler

    def unrouted(self) -> list[ApiKey]:
        return sorted(k for k in self.table if int(k) not in self._handlers)

    def service(self) -> KafkaService:
        missing = self.unrouted()
        if missing:
            raise RuntimeError(f"advertised but not handled: {[k.name for k in missing]}")
        return KafkaService(self.table, self._handle)

    async def _handle(self, request: KafkaRequest, ctx: KafkaRequestContext) -> Any | None:
        header = request.header
        return await self._handlers[header.api_key](request.body, header.api_version, ctx)

    async def _api_versions(self, _body: Any, version: int, _ctx: KafkaRequestContext) -> Any:
        features = self.features() if self.features is not None else None
        return api_versions_response(self.table, version, features=features)
