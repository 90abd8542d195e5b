"""Static stage: one parse, one traversal, every rule; name resolution, C++ extraction."""
