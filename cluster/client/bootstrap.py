"""The way to a cluster on Kafka's protocol: a bootstrap list (`--bootstrap-server` broker
addresses, or `--bootstrap-controller` controller addresses, KIP-919) and one Kafka client.

`send_to_any` tries the addresses in order and returns the first answer; only a node that cannot
be reached (NETWORK_EXCEPTION, REQUEST_TIMED_OUT) sends it to the next one, so an error a node
answers with is the caller's to judge. Every command and tool goes through here, so "which node
answers" is decided in one place.
"""

from __future__ import annotations

from typing import Any

from kafkawire.client import KafkaClient
from kafkawire.errors import Errors, KafkaError
from kafkawire.forwarding import request_active

CLI_CLIENT_ID = "minikraft-cli"
UNREACHABLE = frozenset({Errors.NETWORK_EXCEPTION, Errors.REQUEST_TIMED_OUT})


def split_bootstrap(text: str) -> list[str]:
    addresses = [a.strip() for a in text.split(",") if a.strip()]
    if not addresses:
        raise KafkaError(Errors.INVALID_REQUEST, "no bootstrap address given")
    return addresses


def new_client(client_id: str = CLI_CLIENT_ID, request_timeout_ms: int = 30000) -> KafkaClient:
    return KafkaClient(client_id, request_timeout_ms=request_timeout_ms)


async def send_to_any(
    client: KafkaClient, bootstrap: str | list[str], body: Any, *, timeout_ms: int | None = None
) -> tuple[str, Any]:
    """(address that answered, its kio response) from the first reachable bootstrap node."""
    addresses = split_bootstrap(bootstrap) if isinstance(bootstrap, str) else bootstrap
    last = KafkaError(Errors.NETWORK_EXCEPTION, f"no node answered at {','.join(addresses)}")
    for address in addresses:
        try:
            return address, await client.request(address, body, timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.error not in UNREACHABLE:
                raise
            last = exc
    raise last


ADMIN_TIMEOUT_MS = 15_000


async def request_admin(
    bootstrap: str | list[str],
    body: Any,
    *,
    timeout_ms: int = ADMIN_TIMEOUT_MS,
    client: KafkaClient | None = None,
) -> Any:
    """An admin request to `--bootstrap-server` brokers (which forward writes to the active
    controller) or `--bootstrap-controller` controllers (a standby's NOT_CONTROLLER sends it on
    to the next one), retried on unreachable nodes until the timeout: kafkawire.forwarding's one
    path, the same a broker forwards with. Returns the kio response, error codes and all."""
    addresses = split_bootstrap(bootstrap) if isinstance(bootstrap, str) else bootstrap
    own = client is None
    kafka = client if client is not None else new_client(request_timeout_ms=timeout_ms)
    try:
        return await request_active(
            kafka, lambda: [(a, None) for a in addresses], body, timeout_ms=timeout_ms
        )
    finally:
        if own:
            await kafka.close()
