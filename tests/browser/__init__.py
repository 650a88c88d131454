"""Browser tests (a package, so its conftest has a module name of its own)."""
