"""``python -m hubsync``: the same CLI as the ``hubsync`` command."""

from hubsync.cli.main import main

if __name__ == "__main__":
    main()
