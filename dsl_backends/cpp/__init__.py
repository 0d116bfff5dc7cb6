"""The C++ backend (see manifest.toml)."""
