"""The runtime event store's schemas as hubsync shipped them, for the migration tests.

Never edit: each version is what files in the field were made with. The versions share
pieces (the tables a version left as they were), so each piece is written once and each
shipped schema is the pieces it had, in order; a new version adds its own.
"""

from __future__ import annotations

_META_AND_EVENTS = """
CREATE TABLE store_meta (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE run_events (
  id INTEGER PRIMARY KEY,
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  event_type TEXT NOT NULL,
  occurred_at TEXT NOT NULL,
  recorded_at REAL NOT NULL,
  payload TEXT NOT NULL,
  UNIQUE (run_id, sequence)
);
"""
_OUTBOX_HEAD = """CREATE TABLE outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  event_type TEXT NOT NULL,
"""
_OUTBOX_SYNC_EVENT = """  sync_event BLOB NOT NULL,
"""
"""Version 1 kept each row's bytes in the outbox row itself."""
_OUTBOX_TAIL = """  content_hash TEXT NOT NULL,
  created_at REAL NOT NULL,
  attempted_at REAL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at REAL,
  acked_at REAL,
  outcome TEXT,
  outcome_reason TEXT,
  outcome_at REAL,
  UNIQUE (run_id, sequence)
);
"""
_OUTBOX_INDEXES = """CREATE INDEX outbox_unsent ON outbox(seq)
  WHERE attempts = 0 AND acked_at IS NULL AND outcome IS NULL;
CREATE INDEX outbox_resend ON outbox(next_attempt_at)
  WHERE attempts > 0 AND acked_at IS NULL AND outcome IS NULL;
CREATE INDEX outbox_parked ON outbox(outcome) WHERE acked_at IS NULL AND outcome IS NOT NULL;
"""
_RELAY_STATE = """CREATE TABLE relay_state (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
"""
_OUTBOX_PAYLOADS = """CREATE TABLE outbox_payloads (
  seq INTEGER PRIMARY KEY,
  sync_event BLOB NOT NULL
);
"""
"""Version 2 moved the bytes into their own table."""

EVENT_STORE_SCHEMA_V1 = (
    _META_AND_EVENTS
    + _OUTBOX_HEAD
    + _OUTBOX_SYNC_EVENT
    + _OUTBOX_TAIL
    + _OUTBOX_INDEXES
    + _RELAY_STATE
)
"""producers/store/event_store.py and outbox.py before version 2: the bytes inside the row."""

EVENT_STORE_SCHEMA_V2 = (
    _META_AND_EVENTS
    + _OUTBOX_HEAD
    + _OUTBOX_TAIL
    + _OUTBOX_INDEXES
    + _RELAY_STATE
    + _OUTBOX_PAYLOADS
)
"""producers/store/event_store.py and outbox.py before version 3: no trace context."""
