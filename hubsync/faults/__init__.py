"""Faults injected into a live pipeline, and the invariants that must hold once it drained.

One injector and one checker, shared by ``hubsync demo`` and the chaos soak:

* ``inject.FaultInjector`` writes duplicates, conflicts signed with a runtime's key,
  forgeries, forged acks and garbage onto the streams behind the pipeline's back, and
  remembers each one (``records.Injections``) so the checks can match it;
* ``invariants.InvariantChecker`` proves, once everything has drained, that the hub equals
  the runtimes' outboxes byte for byte, that every fault had exactly its effect and no
  other, and that no planted secret is anywhere (``secrets``). Each check returns a
  ``Check``: its figures, and failures that name keys and places, never event bytes.

A new fault kind is one method of ``FaultInjector`` (listed in ``FaultInjector.KINDS``),
one record type in ``records`` and one check in ``InvariantChecker``.
"""
