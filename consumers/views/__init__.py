"""consumers.views: what operators read and act on: the queue status (``queue_status``),
dead letters with replay and purge (``dead_letters``), security alerts (``alerts``) and
the hub projects that exist (``projects``)."""
