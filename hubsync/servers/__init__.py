"""Private servers the benchmarks and the tests start for themselves, never the machine's own.

* ``postgres``: a PostgreSQL cluster made with ``initdb`` and run with
  ``pg_ctl`` in a temp dir, on a free loopback port (``PostgresServer``);
* ``redis_cluster``: a Redis Cluster of masters with replicas, each node a
  private ``redis-server`` (``RedisClusterProcesses``).

A single private ``redis-server`` is ``hubsync.demo.embedded_redis.RedisServerProcess``,
which the cluster's nodes are made of. Nothing here imports psycopg: the
launchers run the server binaries and speak to Redis only.
"""
