"""The benchmark report behind ``hubsync bench``: the pipeline against its ceilings and peers.

Every figure of one report comes from the same run on the same private
redis-server, so ratios hold on a noisy machine even when absolute rates move.

* ``workload``: the ~540-byte events every measurement uses, stores, entries;
* ``procs``: private servers, child processes, peak RSS, percentiles, the machine;
* ``stages``: relay drain vs raw XADD packed as the relay packs, consumer
  ingest vs raw XREADGROUP + executemany + XACK, and the raw SQLite batch insert;
* ``ceilings``: what each ceiling omits, and the floor Redis and SQLite set
  (Redis's time per entry from ``INFO commandstats``, SQLite's CPU per row);
* ``pipeline``: end-to-end drain (1 relay, 2 consumers) and latency at fixed
  offered loads, with the relay's and consumers' peak RSS;
* ``peers``: the naive design, one RQ job per event, NATS JetStream;
* ``report``: runs them all, the JSON document and the table;
* ``scaleout``: ``--scale-out``, the end-to-end drain with 1, 2 and 4 consumers on
  one redis-server with a SQLite or a PostgreSQL hub and on a Redis Cluster.
"""
