"""Which request and response message types belong to which api key.

Modules that define messages register them at import (`register(ApiKey.VOTE, VoteRequest,
VoteResponse)`). The server looks requests up by api key, the client looks the key up by the
request's class. A `Registry` can also be built privately (tests) so nothing global is touched.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from cluster.protocol.api_keys import ApiKey
from cluster.protocol.schema import compile_message


class UnknownApiKeyError(KeyError):
    """No message types are registered for this api key (or request class)."""


@dataclass(frozen=True, slots=True)
class ApiRegistration:
    api_key: ApiKey
    request_cls: type
    response_cls: type
    version: int


def check_response_convention(response_cls: type) -> None:
    """Every response has all fields defaulted and starts with error_code, error_message.

    That lets a generic error body `{"error_code": N, "error_message": "..."}` decode into any
    response type, which the server and client rely on for UNSUPPORTED_VERSION, INVALID_REQUEST,
    INCONSISTENT_CLUSTER_ID and handler errors.
    """
    fields = [f for f in dataclasses.fields(response_cls) if f.init]
    hints = typing.get_type_hints(response_cls)
    name = response_cls.__name__
    if (
        len(fields) < 2
        or fields[0].name != "error_code"
        or hints["error_code"] is not int
        or fields[0].default != 0
        or fields[1].name != "error_message"
        or hints["error_message"] is not str
        or fields[1].default != ""
    ):
        raise TypeError(
            f'{name} must start with `error_code: int = 0` and `error_message: str = ""`'
        )
    for f in fields:
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"{name}.{f.name} needs a default: every response field is defaulted")


class Registry:
    """Api key <-> (request class, response class, version)."""

    def __init__(self) -> None:
        self._by_key: dict[int, ApiRegistration] = {}
        self._by_request: dict[type, ApiRegistration] = {}

    def register(
        self, api_key: ApiKey, request_cls: type, response_cls: type, version: int = 0
    ) -> ApiRegistration:
        key = ApiKey(api_key)
        if version < 0:
            raise ValueError(f"api version must be >= 0, got {version}")
        registration = ApiRegistration(key, request_cls, response_cls, version)
        existing = self._by_key.get(int(key))
        if existing is not None:
            if existing == registration:
                return existing  # the same module imported twice
            raise ValueError(
                f"api key {key.name} is already registered to "
                f"{existing.request_cls.__qualname__}/{existing.response_cls.__qualname__}"
            )
        other = self._by_request.get(request_cls)
        if other is not None:
            raise ValueError(
                f"{request_cls.__qualname__} is already registered for {other.api_key.name}"
            )
        compile_message(request_cls)
        compile_message(response_cls)
        check_response_convention(response_cls)
        self._by_key[int(key)] = registration
        self._by_request[request_cls] = registration
        return registration

    def lookup(self, api_key: int) -> ApiRegistration | None:
        """The registration for a wire api key, or None if unknown."""
        return self._by_key.get(api_key)

    def registration_of(self, request_obj: Any) -> ApiRegistration:
        registration = self._by_request.get(request_obj.__class__)
        if registration is None:
            raise UnknownApiKeyError(
                f"{type(request_obj).__qualname__} is not a registered request"
            )
        return registration

    def request_type(self, api_key: ApiKey) -> type:
        return self._get(api_key).request_cls

    def response_type(self, api_key: ApiKey) -> type:
        return self._get(api_key).response_cls

    def api_key_of(self, request_obj: Any) -> ApiKey:
        return self.registration_of(request_obj).api_key

    def registrations(self) -> list[ApiRegistration]:
        return sorted(self._by_key.values(), key=lambda r: int(r.api_key))

    def _get(self, api_key: ApiKey) -> ApiRegistration:
        registration = self._by_key.get(int(api_key))
        if registration is None:
            raise UnknownApiKeyError(f"no messages registered for api key {api_key}")
        return registration


# The process-wide registry that message modules fill at import.
_DEFAULT_REGISTRY = Registry()


def default_registry() -> Registry:
    return _DEFAULT_REGISTRY


def register(
    api_key: ApiKey, request_cls: type, response_cls: type, version: int = 0
) -> ApiRegistration:
    return _DEFAULT_REGISTRY.register(api_key, request_cls, response_cls, version)


def request_type(api_key: ApiKey) -> type:
    return _DEFAULT_REGISTRY.request_type(api_key)


def response_type(api_key: ApiKey) -> type:
    return _DEFAULT_REGISTRY.response_type(api_key)


def api_key_of(request_obj: Any) -> ApiKey:
    return _DEFAULT_REGISTRY.api_key_of(request_obj)
