"""The JSONL records: schema, append + fsync, torn-tail repair, identity, pooling."""
