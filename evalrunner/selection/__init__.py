"""Which cases a run takes: -k expressions, shards, the suite order."""


class SelectionError(ValueError):
    """A ``-k`` or ``--shard`` value that cannot be used; the message says where and why."""
