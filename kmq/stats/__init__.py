"""Read models of the tracker's views, pure: per-queue gauges and per-minute rates."""
