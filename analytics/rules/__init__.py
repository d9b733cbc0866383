"""The audit's rules, one package per family of INVARIANTS.md rules:

    quorum/        1-7    Raft metadata quorum (1, 2, 5 checked)
    partitions/    8-19   partitions, ISR, ELR, leader recovery, AlterPartition (8, 10, 11,
                          13, 19: a replay of the metadata log; shards.py runs it as the log
                          decodes, source.py picks the log)
    replication/   20-23  the broker's HWM, truncation, acked writes
    cleanup/       24-25  retention and compaction (cleanup.policy delete / compact)
    groups/        -      consumer-group checks (named, not numbered)

In each, `pure.py` is the rule as plain Python over reader rows (analytics.read): no Spark, no
I/O, so the baseline (analytics.baseline), the simulators and unit tests call it; `spark.py` is
the same rule over DataFrames for the audit (analytics.audit), running the pure functions per
partition (applyInArrow) or the same predicate as a column, and a test holds the two equal. A
new rule goes into its family's pure.py first, then its spark.py, with its name in result.py.
"""
