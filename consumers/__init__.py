"""consumers: the hub side's Redis workers, which read the runtimes' streams into the hub store.

* ``stream``: ``stream.worker.HubConsumer``, one member of consumer group ``hub`` on every
  hub project's events stream. It judges each entry (signature, hash, validity), ingests a
  batch in one hub-store transaction, publishes the outcomes to the runtimes' ack streams
  and conflicts to the alert stream, and only then XACKs. A crash before the XACK means
  redelivery, which the store's dedupe answers with ``duplicate``: every event is stored
  exactly once. ``stream.reclaim`` hands entries idle in a dead consumer to a live one and
  dead-letters one delivered ``max_deliveries`` times, so a poison entry never stalls a
  stream.
* ``jobs``: the RQ jobs that run shared effects and the periodic maintenance.
* ``views``: what operators read and act on: queue status, dead letters (replay, purge),
  security alerts, the hub projects that exist.

From outside, the application imports ``HubConsumer`` and the views; ``errors`` holds this
package's error root.
"""
