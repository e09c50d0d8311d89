"""kenv: a Gymnasium environment whose world is a simulated Linux kernel."""
__version__ = "0.1.0"
