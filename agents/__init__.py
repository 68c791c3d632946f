"""The tracker's agents: one per concern.

- ``track_markers``: the markers agent; every table change happens here, in
  partition order (4. and 5. in the README flow).
- ``propose_ticks``: a timer that proposes TICK markers when a deadline is due.
"""
