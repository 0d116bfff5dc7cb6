"""Metal backend."""
