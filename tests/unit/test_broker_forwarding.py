"""What a broker answers when no controller took a forwarded request in time: for every
forwarded API and every version it advertises, Kafka's response of that version with the error
where Kafka puts it (per topic, per resource, per partition for ElectLeaders v0, else top level),
encodable on the wire."""

from __future__ import annotations

import pytest

from broker.runtime.kafka_admin_apis import FORWARDED_API_KEYS, forward_error_response
from kafkawire.api_versions import BROKER_API_VERSIONS
from kafkawire.errors import Errors
from kafkawire.forwarding import _error_codes
from kafkawire.messages import decode_response, encode_response, request_schema
from tests.unit.test_kafkawire import _sample

CASES = sorted(
    (int(key), version)
    for key in FORWARDED_API_KEYS
    for version in BROKER_API_VERSIONS[key].versions()
)


def test_every_forwarded_api_is_advertised_by_brokers() -> None:
    assert set(FORWARDED_API_KEYS) <= set(BROKER_API_VERSIONS)


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=lambda v: str(v))
def test_the_timeout_answer_names_the_error_in_kafkas_place(api_key: int, version: int) -> None:
    body = _sample(request_schema(api_key, version))
    response = forward_error_response(body, version, Errors.REQUEST_TIMED_OUT, "no controller")
    assert int(Errors.REQUEST_TIMED_OUT) in _error_codes(response)
    assert set(_error_codes(response)) == {int(Errors.REQUEST_TIMED_OUT)}
    assert decode_response(encode_response(response, 9)[4:], api_key, version) == (9, response)
