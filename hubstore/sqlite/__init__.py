"""hubstore.sqlite: the hub store in one SQLite file (``sqlite:///PATH``).

``store.SqliteHubStore`` keeps the ``HubStore`` contract; ``schema`` holds its DDL and its
numbered migrations. Open it through ``hubstore.open_store``, not directly.
"""
