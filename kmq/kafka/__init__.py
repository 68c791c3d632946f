"""Kafka plumbing the SDK and the tracker share: client settings per profile, SASL/SSL,
topic creation, producing under back-pressure, and true end offsets."""
