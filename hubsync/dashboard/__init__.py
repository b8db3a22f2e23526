"""``hubsync dashboard``: the pipeline in a browser, read through the operator commands' own code.

Every number comes from the read models ``hubsync status``, ``dead``, ``alerts``,
``runs``, ``events``, ``lease`` and ``consumers`` use (``consumers.views``,
``hubsync.cli.status``), never from a second reading of Redis or the hub store.
Server-rendered (Starlette, Jinja2 with autoescape), served by uvicorn; the
``web`` extra installs them. Read-only unless started with ``--allow-actions``.
"""
