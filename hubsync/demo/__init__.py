"""``hubsync demo``: the whole pipeline, its faults and its invariants, on a private Redis."""
