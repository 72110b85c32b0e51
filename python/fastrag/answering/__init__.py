"""Answering: a prompt of retrieved evidence, generation with OpenVINO GenAI, cleaned and cited answers."""
