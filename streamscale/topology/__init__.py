"""A small logical-plan layer for the pipelines (after Bejeck and Wang, *Optimizing Kafka Streams
Applications*): describe, optimize, compile to PySpark.

:mod:`.plan` builds a logical plan with a Kafka-Streams-like DSL and infers which operators change
the key; :mod:`.physical` places repartitions (optionally optimized) and splits the result into
sub-topologies; :mod:`.compile` turns it into DataFrame operations; :mod:`.catalog` holds the
blog's two-aggregation example (the plans of UC1-UC4 are in :mod:`streamscale.pipelines.plans`).
"""
