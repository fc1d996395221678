"""The session: ids, tokens, records."""
