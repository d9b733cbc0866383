"""The audit: what a cluster wrote, checked against INVARIANTS.md's rules.

- read/      the on-disk formats as rows, no Spark: the metadata log and snapshots (datasource,
             log_scan: damage), the broker journals, ack and consumer journals, partition logs
             and checkpoints (broker_inputs), the chaos faults (chaos_events).
- engine/    how the rows reach Spark: staging into Parquet outside the JVM (staging; the
             replay source as Arrow columns, record_columns), the broker files as tables
             (broker_tables), the SparkSession (spark_session), GC pauses (gc_pause).
- rules/     one package per family of INVARIANTS.md rules, each with `pure.py` (plain Python
             over reader rows: the baseline, simulators and unit tests call it) beside
             `spark.py` (the same rule over DataFrames, test-equal to the pure form):
             quorum (1-7), partitions (8-19), replication (20-23), cleanup (24-25), groups
             (named checks); result.py is what a rule found.
- report/    AuditResult and its audit.json and index.html.
- audit.py   the Spark audit (`minikraft audit`); baseline.py the same rules in one process
             (`python -m analytics.baseline`); generate.py synthetic metadata logs.

Imports go one way: read <- engine <- rules <- report <- audit, baseline; a rule's pure.py
imports no Spark and does no I/O (tests/unit/test_analytics_layout.py).
"""
