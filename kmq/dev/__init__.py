"""Development tooling (not needed in production): the embedded broker, a tracker worker
as a child process, the demo, and the ``kmq bench`` entry into a checkout's ``bench/``."""
