"""consumers.stream: the hub consumer worker and what it uses on the events streams.

``worker.HubConsumer`` (the daemon ``hubsync consume`` runs) is what the application
imports; ``health``, ``hub_binding`` and ``lag`` are also read by operator tools. The rest
(authentication, the fast entry check, publishing, reclaim, trim, read budget) serve the
worker.
"""
