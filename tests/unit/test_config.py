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
