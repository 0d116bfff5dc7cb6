"""The Triton backend (see manifest.toml)."""
