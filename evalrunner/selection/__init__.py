"""Which cases a run takes: -k expressions, shards, the suite order."""
