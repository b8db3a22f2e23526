"""hubstore.postgres: the hub store in PostgreSQL (``postgresql://``), shared by consumers on
several hosts.

``store.PostgresHubStore`` keeps the ``HubStore`` contract; ``schema`` holds its DDL and
migrations, ``sql`` its dialect and batch statements, ``connection`` the URL, pool and retries. These are the
only modules that import psycopg (the ``postgres`` extra). Open it through
``hubstore.open_store``, not directly.
"""
