"""docs/reliability.md read as a user, a second time, against the session's broker and tracker.

"A settle or extend for a range the tracker handed out and no longer holds (acked, or taken
back when its visibility timeout passed, then redelivered or dead-lettered) is not set
aside: ... it is the queue's ``late`` count": an EXTEND and a REJECT of a copy taken back
are late, and the reject does not dead-letter the message's live redelivery.
"""

from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.integration.views import queue_detail

pytestmark = pytest.mark.usefixtures("tracker")


def test_an_extend_and_a_reject_of_a_copy_taken_back_are_late_and_the_redelivery_lives(
        make_client, shared_settings, tracker, queue):
    client = make_client(shared_settings)
    client.send(queue, b"slow")
    client.flush()
    with client.consumer(queue, visibility_timeout_s=1) as c:
        first = wait_for(lambda: c.receive(0.2), 30, what="the first delivery")
        again = wait_for(lambda: c.receive(0.2), 30, what="the redelivery")
        assert again.delivery_count == 2
        first.extend(60)
        first.reject("stale copy")
        c.flush()

        def late_twice():
            d = queue_detail(tracker, queue)
            return d if d and d["since_start"].get("late", 0) >= 2 else None
        detail = wait_for(late_twice, 20, what="the stale extend and reject counted late")
        # One answer, in log order: the REJECT was applied (late) and dead-lettered nothing.
        assert detail["since_start"]["late"] == 2, detail["since_start"]
        assert not detail["since_start"].get("dead-lettered") and not detail["since_start"].get("rejected"), \
            detail["since_start"]
        again.ack()
        c.flush()
