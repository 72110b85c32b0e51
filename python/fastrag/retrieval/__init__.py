"""Retrieval: a question analysed, ranked by BM25 and vectors, refined, fused, de-duplicated into spans."""
