"""The kernel subsystems the environments act on, each a block that runs on a
simulated kernel and reports what it measured; no Gymnasium here."""
