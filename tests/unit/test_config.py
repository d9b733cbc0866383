from pathlib import Path

import pytest

from kafkawire.config import ConfigError, NodeConfig, parse_properties, props_from_env


def test_properties_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# a controller\nnode.id=3\nprocess.roles=controller\n"
        "listeners=CONTROLLER://127.0.0.1:19093\nmetadata.log.dir=/tmp/x\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:19091, 127.0.0.1:19092\n"
    )
    config = NodeConfig.from_file(path)
    assert config.node_id == 3
    assert config.controller_listener() is not None
    assert config.controller_listener().address == "127.0.0.1:19093"  # type: ignore[union-attr]
    assert config.bootstrap_servers == ["127.0.0.1:19091", "127.0.0.1:19092"]
    assert config.get_int("controller.quorum.election.timeout.ms") == 1000


def test_bad_integer_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"controller\.quorum\.fetch\.timeout\.ms"):
        NodeConfig.from_props(
            {
                "node.id": "1",
                "listeners": "CONTROLLER://127.0.0.1:1",
                "metadata.log.dir": "/tmp/m",
                "controller.quorum.fetch.timeout.ms": "soon",
            }
        )


def test_missing_node_id_and_bad_line() -> None:
    with pytest.raises(ConfigError, match=r"node\.id"):
        NodeConfig.from_props({"listeners": "CONTROLLER://127.0.0.1:1"})
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\nnot a property line\n")


def test_env_uses_kafka_docker_convention() -> None:
    props = props_from_env({"KAFKA_NODE_ID": "2", "KAFKA_PROCESS_ROLES": "broker", "HOME": "/"})
    assert props == {"node.id": "2", "process.roles": "broker"}


BROKER = {
    "node.id": "101",
    "process.roles": "broker",
    "controller.quorum.bootstrap.servers": "controller-1:9093",
    "log.dirs": "/tmp/b",
    "listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094",
    "advertised.listeners": "INTERNAL://broker-1:9092,EXTERNAL://127.0.0.1:19092",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def test_broker_listeners_advertised_and_inter_broker() -> None:
    config = NodeConfig.from_props(BROKER)
    assert [lst.name for lst in config.broker_listeners()] == ["INTERNAL", "EXTERNAL"]
    inter = config.broker_listener()
    assert inter is not None and inter.address == "0.0.0.0:9092"
    assert [config.advertised(lst).address for lst in config.broker_listeners()] == [
        "broker-1:9092", "127.0.0.1:19092"
    ]
    # Without inter.broker.listener.name: Kafka's default PLAINTEXT, else the first listener.
    plain = {
        k: v for k, v in BROKER.items() if not k.startswith(("advertised", "inter", "listener."))
    }
    named = NodeConfig.from_props({**plain, "listeners": "A://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"})
    assert named.broker_listener() == named.listeners[1]
    first = NodeConfig.from_props(plain)
    assert first.broker_listener() == first.listeners[0]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("inter.broker.listener.name", "OTHER",
         "inter.broker.listener.name must be a listener name defined in advertised.listeners"),
        ("advertised.listeners", "INTERNAL://0.0.0.0:9092",
         "cannot use the nonroutable meta-address 0.0.0.0"),
        ("advertised.listeners", "OTHER://h:1",
         "advertised.listeners listener names must be equal to or a subset"),
        ("listener.security.protocol.map", "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT",
         "no security protocol defined for listener EXTERNAL"),
        ("listener.security.protocol.map",
         "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT,EXTERNAL:SSL", "PLAINTEXT only"),
        ("listeners", "INTERNAL://0.0.0.0:9092,INTERNAL://0.0.0.0:9094", "must be unique"),
    ],
)
def test_listener_settings_kafka_refuses_are_refused(key: str, value: str, message: str) -> None:
    # Kafka's KafkaConfig.validateValues / SocketServerConfigs rules, with their messages.
    with pytest.raises(ConfigError, match=message):
        NodeConfig.from_props({**BROKER, key: value})
