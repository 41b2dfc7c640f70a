"""Execution concern: running one SUT experiment (load, pipeline, lag sampling) and its metrics."""
