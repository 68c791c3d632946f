"""Table declarations of the tracker and typed access to them (nothing else)."""
