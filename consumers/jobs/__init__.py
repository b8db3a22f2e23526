"""consumers.jobs: the RQ jobs: shared effects (``effect_jobs`` with ``effect_executors``)
and the periodic maintenance (``maintenance``, scheduled by ``maintenance_cron``), on the
connection ``job_connection`` gives them."""
