"""hubsync.core: the kernel every other package builds on; it imports nothing outside itself.

What it holds, and what anything above may import from it:

* the wire: the sync event model and its per-event check (``wire``), canonical JSON and
  hashing (``canonical``), stream entry fields and outcomes (``entries``), event
  signatures and runtime keys (``signing``), enrollment tokens (``enrollment``), Redis
  key names (``keys``), id rules (``names``), the ACL rules of each role (``acl_rules``);
* settings (``settings``) and the one duration syntax (``durations``);
* Redis: every client (``connections``), reads across streams (``stream_reads``), reply
  values (``redis_values``);
* SQLite: the one database layer (``sqlite``), its private files (``private_files``) and
  numbered schema steps (``migration``);
* small shared parts: errors (``errors``), clock (``clock``), retry delays (``backoff``),
  closing (``closing``), logging (``logs``), metrics (``metrics``) and their HTTP server
  (``metrics_server``), daemon GC tuning
  (``gc_tuning``).

``producers``, ``consumers`` and ``hubstore`` build on it; the application (``hubsync.cli``,
``hubsync.demo``, ``hubsync.benchmarks``, ``hubsync.doctor``, ``hubsync.servers``,
``hubsync.processes``, ``hubsync.provisioning``) sits above them all. A test walks the
kernel's imports and fails on any that leaves it.
"""
