"""producers: the runtime side of hubsync, the half that runs beside the workflows.

* ``store``: a project's local run events and their outbox in one SQLite
  file (``store.event_store.RunEventStore``). ``append_event`` writes the event and its derived, redacted, hashed
  sync event in one transaction: a committed event always has its outbox row,
  the outbox never holds the source payload, and appending never touches
  Redis, so it neither blocks nor fails when the hub or the broker is down.
* ``registry``: which runtime this is and which projects call it home.
* ``relay``: the daemon that sends each outbox, in order, to its hub project's
  events stream and marks a row acked only when the hub answers ``accepted``
  or ``duplicate`` for that row's own content hash; ``conflict`` and
  ``rejected`` rows are parked, never resent.
* ``effects``: shared external effects, each run by at most one box at a time
  under a fenced lease; an attempt whose lease is lost or cannot be confirmed
  is parked as ``blocked_uncertain``, never retried.
* beside them: ``redaction`` and ``derivation`` (what a sync event may carry) and
  ``synthetic`` (the runs ``hubsync produce`` makes).

From outside, import ``registry.RuntimeRegistry``, ``store.event_store`` (``NewEvent``,
``RunEventStore``), ``relay.Relay`` and ``effects``; ``errors`` holds this package's error
root. ``producers.event_store`` is the store's old path, kept for one release.
"""
