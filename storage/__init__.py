"""Log storage, under raft's metadata log and the broker's partitions (Kafka's storage module):
record batch v2 and its compression (core/), segments, the segmented log, snapshot files, fsync
helpers and the power-loss disk mode (runtime/)."""
