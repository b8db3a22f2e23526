"""What the tests share: fixtures' helpers, stand-ins for the other side of the wire, and the
scripts some tests run as child processes. No test module imports another test module."""
