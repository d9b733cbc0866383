"""Apache Kafka's wire protocol, the foundation every minikraft listener and client stands on:
size-prefixed framing, request and response headers, encode/decode of any message by (api key,
version) through `kio`, the error table, the ApiVersions table and the one message kio lacks
(GetReplicaLogInfo). It imports nothing of minikraft's (ARCHITECTURE.md "Layout and layering").
"""
