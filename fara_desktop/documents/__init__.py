"""Chat with your own documents: text extracted from files, cut into passages, searchable with SQLite's FTS5."""
