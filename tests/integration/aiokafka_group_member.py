"""One aiokafka group member as its own process (so a test can kill -9 it): default settings
but group_id; prints one JSON line per event and record on stdout:

    {"event": "ready", "partitions": [...]}    assigned, and positions known
    {"p": 0, "o": 17}                         a record consumed (partition, offset)

SIGTERM stops it cleanly (aiokafka commits what it consumed on stop). Runs at most
`max_seconds`, so a test that forgets it cannot leave it behind for long.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener


def emit(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.generation = 0

    def on_partitions_revoked(self, revoked: object) -> None:
        return None

    def on_partitions_assigned(self, assigned: object) -> None:
        self.generation += 1


async def main(bootstrap: str, topic: str, group: str, max_seconds: float) -> None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    listener = Listener()
    consumer.subscribe([topic], listener=listener)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await consumer.start()
    reported = 0
    deadline = time.monotonic() + max_seconds
    try:
        while not stop.is_set() and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for tp, records in batches.items():
                for record in records:
                    emit({"p": tp.partition, "o": record.offset})
            assignment = consumer.assignment()
            if listener.generation != reported and assignment:
                for tp in assignment:
                    await consumer.position(tp)
                reported = listener.generation
                emit({"event": "ready", "partitions": sorted(tp.partition for tp in assignment)})
    finally:
        await consumer.stop()
        emit({"event": "stopped"})


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])))
