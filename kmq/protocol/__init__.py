"""What the SDK and the tracker share, pure (no Kafka, no clock): the marker codec, the
tracker's table records, its state machine, the deadline clock, the record envelope and
queue placement."""
