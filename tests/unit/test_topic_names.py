"""Topic names as Kafka's Topic.validate has them (restated from Kafka's TopicTest), with
InvalidTopicException's messages word for word, and the '.'/'_' collision rule; then every
controller path that takes a topic name answers with them (issue 30 item 9)."""

from __future__ import annotations

import pytest
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.static.primitive import i8

from kafkawire import topic
from kafkawire.config import NodeConfig
from kafkawire.errors import Errors
from metadata import kafka_describe
from tests.unit.test_replication_control import alter, brokers, create, describe, run, with_foo

BAD = "a)(*&^%"
BAD_MESSAGE = (
    "Topic name is invalid: 'a)(*&^%' contains one or more characters other than "
    "ASCII alphanumerics, '.', '_' and '-'"
)


@pytest.mark.parametrize(
    "name", ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "x" * 249]
)
def test_kafkas_valid_names(name: str) -> None:
    assert topic.invalid_topic_reason(name) is None and topic.is_valid(name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "the empty string is not allowed"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("a" * 250, f"the length of '{'a' * 250}' is longer than the max allowed length 249"),
        # Java's String.length(): a character outside the BMP is two UTF-16 code units.
        ("\U0001f600" * 125, f"the length of '{chr(0x1F600) * 125}' is longer than the max "
         "allowed length 249"),
        ("foo bar", "'foo bar' contains one or more characters other than ASCII alphanumerics, "
         "'.', '_' and '-'"),
        (BAD, BAD_MESSAGE.removeprefix("Topic name is invalid: ")),
    ],
)
def test_kafkas_invalid_names_and_messages(name: str, why: str) -> None:
    assert topic.invalid_topic_reason(name) == f"Topic name is invalid: {why}"


@pytest.mark.parametrize("char", "/\\,\0:\"';*? \t\r\n=é")
def test_every_character_outside_the_legal_set_is_refused(char: str) -> None:
    assert not topic.is_valid(f"Is {char}illegal")


def test_collisions_are_dot_against_underscore_at_the_same_place() -> None:
    assert topic.unify_collision_chars("_.topic") == "__topic"
    for dotted, underscored in zip(
        [".topic", "to.pic", "topic."], ["_topic", "to_pic", "topic_"], strict=True
    ):
        assert topic.colliding_topic(underscored, [dotted, "other"]) == dotted
        assert topic.colliding_topic(dotted, [underscored]) == underscored
    assert topic.colliding_topic("to.pic", ["topic_", "_topic"]) is None  # other places
    assert topic.colliding_topic("to.pic", ["to.pic"]) is None  # itself: already exists
    assert topic.colliding_topic("plain", ["plain"]) is None
    assert topic.is_internal("__consumer_offsets") and not topic.is_internal("__cluster_metadata")


def test_create_topics_answers_kafkas_errors_and_messages() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    for name, error, message in [
        (BAD, Errors.INVALID_TOPIC_EXCEPTION, BAD_MESSAGE),
        ("", Errors.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: the empty string is not "
         "allowed"),
        ("__cluster_metadata", Errors.INVALID_REQUEST,
         "Creation of internal topic __cluster_metadata is prohibited."),
        ("foo", Errors.TOPIC_ALREADY_EXISTS, "Topic 'foo' already exists."),
    ]:
        result = create(image, name, 1, 1)
        assert result.records == ()
        answer = result.response.topics[0]
        assert (answer.error_code, answer.error_message) == (error, message), name


def test_create_refuses_a_name_colliding_with_an_existing_topic() -> None:
    image = brokers(3)
    made = create(image, "metrics.in", 1, 1)
    assert made.response.topics[0].error_code == 0
    image = run(image, made)
    for name in ("metrics_in", "metrics.in"):
        result = create(image, name, 1, 1)
        answer = result.response.topics[0]
        assert result.records == ()
        if name == "metrics.in":
            assert answer.error_code == Errors.TOPIC_ALREADY_EXISTS
        else:
            assert (answer.error_code, answer.error_message) == (
                Errors.INVALID_TOPIC_EXCEPTION,
                "Topic 'metrics_in' collides with existing topic: metrics.in",
            )
    assert create(image, "metrics-in", 1, 1).response.topics[0].error_code == 0


def test_configs_and_describe_paths_refuse_an_invalid_name_before_looking_it_up() -> None:
    image = with_foo(brokers(3), (1, 2, 3))
    altered = alter(image, BAD, "min.insync.replicas", "2").response.responses[0]
    assert (altered.error_code, altered.error_message) == (
        Errors.INVALID_TOPIC_EXCEPTION, BAD_MESSAGE
    )
    default = alter(image, "", "min.insync.replicas", "2").response.responses[0]
    assert (default.error_code, default.error_message) == (
        Errors.INVALID_REQUEST, "Default topic resources are not allowed."
    )
    described = describe(image, [BAD, "missing", "foo"]).topics
    assert [(t.name, t.error_code) for t in described] == [
        (BAD, Errors.INVALID_TOPIC_EXCEPTION),
        ("foo", Errors.NONE),
        ("missing", Errors.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    configs = kafka_describe.describe_configs(
        image,
        DescribeConfigsRequest(
            resources=tuple(
                DescribeConfigsResource(
                    resource_type=i8(2), resource_name=name, configuration_keys=None
                )
                for name in (BAD, "missing")
            ),
            include_synonyms=False,
            include_documentation=False,
        ),
        4,
        NodeConfig.from_props(
            {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:1", "metadata.log.dir": "/tmp/m"}
        ),
    )
    assert [(r.error_code, r.error_message) for r in configs.results] == [
        (Errors.INVALID_TOPIC_EXCEPTION, BAD_MESSAGE),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "topic 'missing' does not exist"),
    ]
