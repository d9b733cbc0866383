"""Latency with jitter (and reordering) for a node namespace whose kernel has no sch_netem.

`ip netns exec NS python -m cluster.chaos.netns_delay --queue 0 --delay-ms 50 --jitter-ms 20`
binds NFQUEUE queue 0 over netlink (the node's nftables output chain queues its packets there,
with `bypass`, so packets flow untouched if this process is gone) and gives each packet its
ACCEPT verdict after delay +- jitter ms (uniform, seeded), the way netem delays them: packets
with different delays leave out of order, which is netem's reordering under jitter; with
--reorder-pct a share of the packets is accepted at once, as netem's `reorder`. It prints
READY_LINE once the queue is bound: whoever starts it waits for that line before it queues
packets, since until then `bypass` lets them through undelayed. Chaos stops it by its pid
(SIGTERM) when it heals the network.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import socket
import struct
import sys

READY_LINE = "bound"
NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
QUEUE_MAXLEN = 16384


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def _message(msg: int, queue: int, attrs: bytes, seq: int) -> bytes:
    body = struct.pack("!BBH", socket.AF_UNSPEC, 0, queue) + attrs
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg
    return struct.pack("=IHHII", 16 + len(body), kind, NLM_F_REQUEST, seq, 0) + body


def _packet_ids(data: bytes) -> list[int]:
    """The packet ids of every NFQNL_MSG_PACKET in one netlink read."""
    ids = []
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, _seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            break
        if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            attr = offset + 16 + 4  # past nlmsghdr and nfgenmsg
            end = offset + length
            while attr + 4 <= end:
                attr_len, attr_kind = struct.unpack_from("=HH", data, attr)
                if attr_len < 4:
                    break
                if attr_kind & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from("!I", data, attr + 4)[0])
                    break
                attr += (attr_len + 3) & ~3
        offset += (length + 3) & ~3
    return ids


class Delayer:
    def __init__(
        self, queue: int, delay_ms: float, jitter_ms: float, reorder_pct: float, seed: int
    ) -> None:
        self.queue = queue
        self.delay_ms = delay_ms
        self.jitter_ms = jitter_ms
        self.reorder_pct = reorder_pct
        self.rng = random.Random(seed)
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.seq = 0

    def send(self, msg: int, attrs: bytes) -> None:
        self.seq += 1
        self.sock.send(_message(msg, self.queue, attrs, self.seq))

    def bind(self) -> None:
        self.sock.bind((0, 0))
        self.send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND,
                                                                    socket.AF_INET)))
        self.send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_PARAMS, struct.pack("!IBxxx", 0,
                                                                       NFQNL_COPY_META)[:5]))
        self.send(NFQNL_MSG_CONFIG, _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", QUEUE_MAXLEN)))
        self.sock.setblocking(False)

    def accept(self, packet_id: int) -> None:
        self.send(NFQNL_MSG_VERDICT, _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT,
                                                                         packet_id)))

    def delay_s(self) -> float:
        if self.reorder_pct and self.rng.uniform(0, 100) < self.reorder_pct:
            return 0.0
        return max(0.0, self.delay_ms + self.rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)

        def readable() -> None:
            while True:
                try:
                    data = self.sock.recv(65536)
                except BlockingIOError:
                    return
                for packet_id in _packet_ids(data):
                    loop.call_later(self.delay_s(), self.accept, packet_id)

        loop.add_reader(self.sock.fileno(), readable)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queue", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--reorder-pct", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    delayer = Delayer(args.queue, args.delay_ms, args.jitter_ms, args.reorder_pct, args.seed)
    delayer.bind()
    # The netlink config messages are handled as they are sent: the queue is bound now.
    print(READY_LINE, flush=True)
    sys.stdout.close()
    asyncio.run(delayer.run())


if __name__ == "__main__":
    main()
