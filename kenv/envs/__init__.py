"""Gymnasium environments (the only layer that imports gymnasium)."""
