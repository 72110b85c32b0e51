"""Evaluation: question sets and results files, a whole set searched, recall@k by the grading rule."""
