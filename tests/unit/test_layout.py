"""A local cluster's layout (issue 30 item 12): chosen node ids, ports per node and settings
for one node, parsed and checked before anything starts; LocalCluster.plan places the nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.launch.layout import (
    LayoutError,
    parse_ids,
    parse_node_setting,
    parse_ports,
    plan_layout,
)
from cluster.launch.local_cluster import LocalCluster


def test_defaults_are_controllers_1_up_and_brokers_101_up() -> None:
    layout = plan_layout()
    assert (layout.controller_ids, layout.broker_ids) == ((1, 2, 3), (101, 102, 103))
    assert plan_layout(controllers=1, brokers=0).broker_ids == ()


def test_ids_given_to_one_role_are_skipped_by_the_others_defaults() -> None:
    layout = plan_layout(broker_ids=parse_ids("0,1,2", "--broker-ids"))
    assert (layout.controller_ids, layout.broker_ids) == ((3, 4, 5), (0, 1, 2))
    layout = plan_layout(controller_ids=(101, 7), brokers=2)
    assert layout.broker_ids == (102, 103)


def test_node_settings_are_per_node() -> None:
    layout = plan_layout(
        broker_ids=(0, 1),
        node_settings=[parse_node_setting("1:num.partitions=3"), (1, "a", "b")],
    )
    assert layout.node_settings == {1: {"num.partitions": "3", "a": "b"}}


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: parse_ids("0,x", "--broker-ids"), "--broker-ids: expected comma-separated"),
        (lambda: parse_ids("1,1", "--broker-ids"), "names a value twice"),
        (lambda: parse_ids("-1", "--broker-ids"), "node ids are >= 0"),
        (lambda: parse_ports("0", "--broker-ports"), "ports are 1-65535"),
        (lambda: parse_node_setting("x=b"), "expects NODE_ID:key=value"),
        (lambda: parse_node_setting("1:=b"), "expects key=value"),
        (lambda: plan_layout(controller_ids=(1,), broker_ids=(0, 1)), "node ids [1] are given"),
        (lambda: plan_layout(brokers=2, broker_ids=(0, 1, 2)), "--brokers 2 but 3 id(s)"),
        (lambda: plan_layout(broker_ports=(9092, 9095)), "2 port(s) for 3 node(s)"),
        (lambda: plan_layout(controller_ports=(1, 2, 3), broker_ports=(3, 4, 5)),
         "a port is given to two nodes"),
        (lambda: plan_layout(node_settings=[(7, "a", "b")]), "names node 7"),
        (lambda: plan_layout(controllers=0), "controllers: 1 to 9"),
    ],
)
def test_a_layout_that_cannot_start_is_refused_with_the_option_named(
    call: object, says: str
) -> None:
    with pytest.raises(LayoutError, match=None) as raised:
        call()  # type: ignore[operator]
    assert says in str(raised.value)


def test_plan_places_nodes_on_their_ids_ports_and_settings(tmp_path: Path) -> None:
    layout = plan_layout(
        controllers=1, broker_ids=(0, 1, 2), broker_ports=(9092, 9095, 9098),
        node_settings=[(1, "num.partitions", "3")],
    )
    cluster = LocalCluster.plan(tmp_path, base_port=0, overrides={"k": "v"}, layout=layout)
    assert [(b.name, b.port) for b in cluster.brokers] == [
        ("broker-0", 9092), ("broker-1", 9095), ("broker-2", 9098)
    ]
    assert [c.node_id for c in cluster.controllers] == [3]
    props = {b.node_id: cluster.node_properties(b) for b in cluster.brokers}
    assert props[1]["num.partitions"] == "3" and "num.partitions" not in props[0]
    assert props[0]["k"] == "v" and props[0]["node.id"] == "0"
    assert props[2]["listeners"] == "PLAINTEXT://127.0.0.1:9098"
    http = [s.http_port for s in cluster.all_nodes()]
    assert not {9092, 9095, 9098} & set(http)
    with pytest.raises(LayoutError, match="also one --base-port"):
        LocalCluster.plan(
            tmp_path, base_port=19090,
            layout=plan_layout(controllers=1, brokers=1, broker_ports=(19091,)),
        )
