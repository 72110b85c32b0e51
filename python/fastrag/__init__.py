"""fastrag: retrieval-augmented generation for codebases."""
