"""Tests of the Python client against the real Rebound sidecar (see sidecar.py)."""
