"""The controller's admin messages have one shape, the newest version's kio entity: every version
a controller advertises lifts into it field for field, and the core's answer lowers into every
version so that it encodes and decodes on the wire (kafkawire/admin_messages.py)."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.static.primitive import i8

from kafkawire import admin_messages as am
from kafkawire import constants
from kafkawire.api_versions import CONTROLLER_API_VERSIONS
from kafkawire.errors import Errors
from kafkawire.messages import decode_response, encode_response, request_schema, wire_error
from tests.unit.test_kafkawire import _sample

CASES = sorted(
    (key, version) for key in am.NEWEST for version in CONTROLLER_API_VERSIONS[key].versions()
)


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=lambda v: str(v))
def test_every_version_lifts_into_the_newest(api_key: am.ApiKey, version: int) -> None:
    body = _sample(request_schema(int(api_key), version))
    lifted = am.lift(api_key, body)
    assert type(lifted) is request_schema(int(api_key), am.NEWEST[api_key])
    assert am.lift(api_key, lifted) == lifted  # the newest lifts into itself unchanged


def test_delete_topics_names_become_topic_states_and_answers_lower_to_v1() -> None:
    old = request_schema(int(am.ApiKey.DELETE_TOPICS), 1)(
        topic_names=("a", "b"), timeout=datetime.timedelta(milliseconds=5)
    )
    lifted = am.lift(am.ApiKey.DELETE_TOPICS, old)
    assert [(t.name, t.topic_id) for t in lifted.topics] == [("a", am.ZERO_UUID), ("b", am.ZERO_UUID)]
    response = am.delete_topics_response(
        [am.deletable_topic_result("a", error=Errors.UNKNOWN_TOPIC_OR_PARTITION, message="gone")]
    )
    lowered = am.lower(am.ApiKey.DELETE_TOPICS, response, 1)
    assert [(r.name, r.error_code) for r in lowered.responses] == [
        ("a", Errors.UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert decode_response(encode_response(lowered, 7)[4:], int(am.ApiKey.DELETE_TOPICS), 1) == (
        7,
        lowered,
    )


def test_create_partitions_assignments_lift_and_answers_lower_to_every_version() -> None:
    v0 = request_schema(int(am.ApiKey.CREATE_PARTITIONS), 0)
    body = _sample(v0)
    lifted = am.lift(am.ApiKey.CREATE_PARTITIONS, body)
    assert [[list(a.broker_ids) for a in t.assignments or ()] for t in lifted.topics] == [
        [list(a.broker_ids) for a in t.assignments or ()] for t in body.topics
    ]
    response = am.create_partitions_response(
        [am.create_partitions_result("t", Errors.INVALID_PARTITIONS, "no")]
    )
    for version in CONTROLLER_API_VERSIONS[am.ApiKey.CREATE_PARTITIONS].versions():
        lowered = am.lower(am.ApiKey.CREATE_PARTITIONS, response, version)
        key = int(am.ApiKey.CREATE_PARTITIONS)
        assert decode_response(encode_response(lowered, 3)[4:], key, version) == (3, lowered)


CONFIGS_ANSWER = am.incremental_alter_configs_response(
    [am.config_resource_result(2, "t", Errors.INVALID_CONFIG, "bad value")]
)


@pytest.mark.parametrize("api_key", [am.ApiKey.INCREMENTAL_ALTER_CONFIGS, am.ApiKey.ALTER_CONFIGS])
def test_the_config_answer_lowers_into_both_config_apis_every_version(api_key: am.ApiKey) -> None:
    for version in CONTROLLER_API_VERSIONS[api_key].versions():
        lowered = am.lower(api_key, CONFIGS_ANSWER, version)
        assert [(r.resource_name, r.error_code, r.error_message) for r in lowered.responses] == [
            ("t", Errors.INVALID_CONFIG, "bad value")
        ]
        assert decode_response(encode_response(lowered, 5)[4:], int(api_key), version) == (
            5,
            lowered,
        )


def _round_trips(api_key: am.ApiKey, response: object) -> list[object]:
    """`response` lowered into every version the controller advertises, each checked to decode
    from its bytes and encode to the same bytes (a zero topic id decodes as None)."""
    lowered = []
    for version in CONTROLLER_API_VERSIONS[api_key].versions():
        answer = am.lower(api_key, response, version)
        frame = encode_response(answer, 9)
        correlation_id, decoded = decode_response(frame[4:], int(api_key), version)
        assert (correlation_id, encode_response(decoded, 9)) == (9, frame)
        lowered.append(decoded)
    return lowered


def test_create_topics_lifts_assignments_and_configs_and_answers_lower_to_every_version() -> None:
    v2 = request_schema(int(am.ApiKey.CREATE_TOPICS), 2)
    body = _sample(v2)
    lifted = am.lift(am.ApiKey.CREATE_TOPICS, body)
    assert [
        (t.name, [list(a.broker_ids) for a in t.assignments], [(c.name, c.value) for c in t.configs])
        for t in lifted.topics
    ] == [
        (t.name, [list(a.broker_ids) for a in t.assignments], [(c.name, c.value) for c in t.configs])
        for t in body.topics
    ]
    config = am.CreatableTopicConfigs(
        name="retention.ms", value="1000", read_only=False, config_source=i8(1), is_sensitive=False
    )
    response = am.create_topics_response(
        [
            am.creatable_topic_result("a", topic_id=uuid.UUID(int=5), num_partitions=3,
                                      replication_factor=2, configs=(config,)),
            am.creatable_topic_result("b", Errors.TOPIC_ALREADY_EXISTS, "Topic 'b' already exists."),
        ]
    )
    for answer in _round_trips(am.ApiKey.CREATE_TOPICS, response):
        assert [(t.name, t.error_code, t.error_message) for t in answer.topics] == [  # type: ignore[attr-defined]
            ("a", Errors.NONE, None),
            ("b", Errors.TOPIC_ALREADY_EXISTS, "Topic 'b' already exists."),
        ]


def test_elect_leaders_v0_lifts_as_preferred_and_answers_lower_to_every_version() -> None:
    v0 = request_schema(int(am.ApiKey.ELECT_LEADERS), 0)
    body = _sample(v0)
    lifted = am.lift(am.ApiKey.ELECT_LEADERS, body)
    assert lifted.election_type == constants.ELECTION_PREFERRED
    assert [(t.topic, list(t.partitions), t.designated_leaders) for t in lifted.topic_partitions] == [
        (t.topic, list(t.partitions), None) for t in body.topic_partitions
    ]
    response = am.elect_leaders_response(
        [
            am.ElectLeadersTopicResult(
                topic="t",
                partition_result=(
                    am.election_result(0, leader_id=2),
                    am.election_result(1, Errors.REQUEST_LIMIT_REACHED, "at most 1000"),
                ),
            )
        ]
    )
    lowered = _round_trips(am.ApiKey.ELECT_LEADERS, response)
    for answer in lowered:
        results = answer.replica_election_results[0].partition_result  # type: ignore[attr-defined]
        assert [wire_error(p.error_code, p.error_message) for p in results] == [
            Errors.NONE,
            Errors.REQUEST_LIMIT_REACHED,
        ]
    # Only v3 carries minikraft's tagged LeaderId.
    assert [p.leader_id for p in lowered[-1].replica_election_results[0].partition_result] == [2, -1]  # type: ignore[attr-defined]
