"""consumers: the hub side's Redis workers, which read the runtimes' streams into the hub store.

* ``worker``: ``HubConsumer``, one member of consumer group ``hub`` on every
  hub project's events stream. It validates each entry, recomputes its hash,
  ingests a batch in one hub-store transaction, publishes the outcomes to the
  runtimes' ack streams and conflicts to the alert stream, and only then
  XACKs. A crash before the XACK means redelivery, which the store's dedupe
  answers with ``duplicate``: every event is stored exactly once.
* ``reclaim``: entries idle in a dead consumer are claimed by a live one; an
  entry delivered ``max_deliveries`` times is dead-lettered with its reason
  and acked, so one poison entry never stalls a stream.
* ``dead_letters``, ``alerts``, ``queue_status``, ``lag``: what operators read
  and replay.
* ``effect_jobs``, ``maintenance``: the RQ jobs that run shared effects and
  the periodic purge.
"""
