"""Indexing: the corpus walked and read, cut into chunks, written as an index generation (BM25, optional vectors)."""
