"""Apache Kafka itself, run beside minikraft: its jars (`make kafka-deps`), its command-line
tools (tools.py) and a real Kafka cluster planned like `minikraft up`'s (cluster.py)."""
