"""The dispatcher of shared queues (docs/shared-queues.md): a thread per tracker worker
that hands each shared queue's records to the consumers that asked (CREDITs), with its
reader, lanes, epochs, inbox, mode switches and ordered queues (docs/ordering.md)."""
