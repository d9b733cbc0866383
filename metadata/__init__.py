"""The cluster metadata shared by controllers and brokers (Kafka's `metadata` module): the loader
that replays committed `__cluster_metadata` records into the MetadataImage and hands each
(delta, image) to the publishers registered with it, the snapshot generator, and the wire views
of the image both node kinds answer from. Pure: no I/O, clocks or randomness (ARCHITECTURE.md);
the node runtimes pass those in."""
