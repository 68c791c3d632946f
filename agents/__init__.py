"""The tracker's agents: one per concern.

- ``runtime``: the worker's one :class:`~agents.runtime.TrackerRuntime` (owned
  partitions, redeliverer, dispatcher, queue settings), built there once, started and
  stopped with the app; everything below and in ``web/`` reaches it by ``runtime()``.
- ``track_markers``: the markers agent; every table change happens here, in
  partition order (4. and 5. in the README flow).
- ``propose_ticks``: a timer that proposes TICK markers when a deadline is due.
"""
