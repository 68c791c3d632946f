"""README.md's Python snippets, run as a user copies them, on the real embedded broker.

The blocks are read from README.md itself (a change there is run here). Only what the
test deployment needs is rewritten: the client gets the suite's settings (its own topic
names) instead of ``bootstrap_servers="127.0.0.1:9092"``, the queues get names unique to
the test, and the first receive waits up to 60 s instead of 5 (CI is two slow cores).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kmq
from tests.conftest import wait_for

pytestmark = pytest.mark.usefixtures("tracker")

README = Path(__file__).resolve().parents[2] / "README.md"


def python_block(containing: str) -> str:
    """The README's ```python block that contains ``containing``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    found = [b for b in blocks if containing in b]
    assert len(found) == 1, f"README.md has {len(found)} python blocks with {containing!r}"
    return found[0]


def rewritten(block: str, queues: dict[str, str]) -> str:
    for name, unique in queues.items():
        block = block.replace(f'"{name}"', f'"{unique}"')
    return block


def test_the_client_snippet_sends_receives_and_acks(shared_settings, queue):
    block = python_block("client = kmq.Client(")
    address = 'kmq.Client(bootstrap_servers="127.0.0.1:9092")'
    assert address in block
    assert "c.receive(timeout_s=5)" in block
    code = rewritten(block.replace(address, "kmq.Client(settings=settings)")
                     .replace("c.receive(timeout_s=5)", "c.receive(timeout_s=60)"), {"orders": queue})
    ns = {"settings": shared_settings}
    exec(compile(code, str(README), "exec"), ns)  # noqa: S102 - the README's own code
    client, msg, batch = ns["client"], ns["msg"], ns["batch"]
    try:
        # 1. what the snippet says of the message it received and acked
        assert isinstance(msg, kmq.Message)
        assert (msg.queue, msg.value, msg.headers, msg.delivery_count) == (queue, b"payload", {"h": b"v"}, 1)
        assert msg.id == ns["msg_id"]
        assert msg.settled == "acked"
        # 2. the batch is a list of messages, acked at once; whatever of a, b, c it did not
        #    take within its second comes back to the next consumer (never lost)
        assert isinstance(batch, list) and all(m.settled == "acked" for m in batch)
        seen = [m.value for m in batch]
        with client.consumer(queue) as c:
            def drained() -> bool:
                more = c.receive_batch(10, timeout_s=0.5)
                more.ack()
                seen.extend(m.value for m in more)
                return sorted(seen) == [b"a", b"b", b"c"]
            wait_for(drained, 60, what="a, b and c")
            # 3. the delayed send (90 s) is not delivered now, and the acked message never again
            assert c.receive(timeout_s=1) is None
    finally:
        client.close()


def test_the_queue_settings_and_ordering_snippets(shared_settings, make_client, queue):
    client = make_client(shared_settings)
    ns = {"kmq": kmq, "client": client}
    settings_block = python_block("client.configure_queue(\"orders\"")
    exec(compile(rewritten(settings_block, {"orders": queue}), str(README), "exec"), ns)  # noqa: S102
    wait_for(lambda: client.queue_config(queue).spread == 4, 30, what="the settings in the client's view")
    cfg = client.queue_config(queue)
    assert (cfg.visibility_timeout_s, cfg.max_deliveries, cfg.max_processing_s, cfg.dead_letter,
            cfg.spread, cfg.dispatch) == (60, 3, 600, True, 4, "shared")
    assert cfg.backoff == kmq.Backoff.exponential(base_s=1, max_s=300, jitter="full")

    payments = f"{queue}-payments"
    ordering_block = python_block("ordering=\"group\"")
    # The README sends once; a second send with the same dedup_id returns the first's id.
    exec(compile(rewritten(ordering_block, {"payments": payments}), str(README), "exec"), ns)  # noqa: S102
    first = client.send(payments, b"...", group="account-42", dedup_id="txn-991")
    again = client.send(payments, b"...", group="account-42", dedup_id="txn-991")
    assert first == again
    wait_for(lambda: client.queue_config(payments).ordering == "group", 30, what="ordering='group'")
