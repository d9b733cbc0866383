"""minikraft's own Kafka client code, on Kafka's protocol: the bootstrap list and admin requests,
the producer, the consumer, topics, elections, consumer groups, health and unclean recovery.
The `minikraft` command (cluster/cli), chaos, the launcher, the console and the benchmarks share
it; it imports none of them."""
