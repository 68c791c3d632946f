"""Which changelog records Faust fetched and dropped, and where to read again (app.changelog_refetch)."""

from app.changelog_refetch import dropped

P2, P3 = ("t-changelog", 2), ("t-changelog", 3)


def test_a_fetch_handed_on_whole_drops_nothing():
    assert dropped({P2: [0, 1, 2]}, {P2: 2}) == {}


def test_a_fetch_handed_on_to_nobody_is_read_again_from_its_first_record():
    # The standby's first fetch came back while recovery had the flow paused.
    assert dropped({P2: [0, 1, 2, 3], P3: [0, 1]}, {}) == {P2: (0, 4), P3: (0, 2)}


def test_a_fetch_cut_short_is_read_again_after_the_last_record_handed_on():
    # The flow stopped, or the generation changed, in the middle of the batch.
    assert dropped({P2: [10, 11, 15, 16]}, {P2: 11}) == {P2: (15, 17)}


def test_partitions_without_records_are_left_alone():
    assert dropped({P2: [], P3: [5]}, {P3: 5}) == {}


def test_a_record_whose_hand_over_was_given_up_is_read_again_from_there():
    # Yielded by the fetch (so "handed"), then cut short while its buffer was full
    # (app.drain_fast_path): the rest of the batch went on past it.
    assert dropped({P2: [10, 11, 12, 13]}, {P2: 13}, {P2: 11}) == {P2: (11, 14)}
    assert dropped({P2: [10, 11, 12, 13]}, {P2: 11}, {P2: 11}) == {P2: (11, 14)}
    assert dropped({P2: [10, 11]}, {P2: 11}, {P3: 4}) == {}


class _Tp:
    def __init__(self, topic, partition):
        self.topic, self.partition = topic, partition


class _Msg:
    def __init__(self, offset):
        self.offset = offset


def _drain(records, cut_at, changelogs=("t-changelog",)):
    """Run in_order as Faust's drain would, the hand-over of ``cut_at`` (key, offset) cut short."""
    import asyncio

    from app.changelog_refetch import in_order

    async def fetched():
        for key, offset in records:
            yield _Tp(*key), _Msg(offset)

    cut, handed, got = {}, {}, []

    async def run():
        async for tp, msg in in_order(fetched(), cut, set(changelogs), handed):
            key = (tp.topic, tp.partition)
            if (key, msg.offset) == cut_at:
                cut.setdefault(key, msg.offset)  # app.drain_fast_path's note; never reached recovery
            else:
                got.append((key, msg.offset))
    asyncio.run(run())
    return got, handed, cut


def test_nothing_of_a_changelog_partition_goes_on_after_a_cut_record_and_it_is_all_read_again():
    # The flow was resumed between the cut and the fetch's next record: before, 12 and 13
    # went on, recovery saw 13, and ignored 11 when it was fetched again.
    records = [(P2, 10), (P2, 11), (P3, 4), (P2, 12), (P2, 13), (P3, 5)]
    got, handed, cut = _drain(records, (P2, 11))
    assert got == [(P2, 10), (P3, 4), (P3, 5)]
    assert dropped({P2: [10, 11, 12, 13], P3: [4, 5]}, handed, cut) == {P2: (11, 14)}


def test_a_stream_partitions_records_go_on_after_a_cut():
    # The markers agent reads a stream's gaps itself (agents/gap_reader.py).
    got, _, _ = _drain([(("markers", 0), 1), (("markers", 0), 2)], (("markers", 0), 1))
    assert got == [(("markers", 0), 2)]


def test_a_flow_resume_keeps_the_changelog_records_recovery_has_not_taken_and_a_rebalance_drops_them():
    from mode.utils.queues import FlowControlEvent, ThrowableQueue

    from app.changelog_refetch import keep_on_resume

    flow = FlowControlEvent()  # Faust's app.flow_control: suspended until recovery resumes it
    changelog = ThrowableQueue(flow_control=flow, clear_on_resume=True)
    stream = ThrowableQueue(flow_control=flow, clear_on_resume=True)
    keep_on_resume(changelog, flow)
    flow.resume()  # the standbys' fetch begins
    for offset in range(3):
        changelog.put_nowait(("standby record", offset))
        stream.put_nowait(("markers record", offset))
    changelog.get_nowait()  # recovery took one
    # Recovery completes and resumes the flow again: the standby records handed on stay.
    flow.resume()
    kept = [changelog.get_nowait() for _ in range(changelog.qsize())]
    assert kept == [("standby record", 1), ("standby record", 2)]
    assert stream.empty(), "a stream's buffer is still Faust's to empty"
    # A rebalance suspends the flow and empties every queue, the changelog's too.
    changelog.put_nowait(("standby record", 3))
    flow.suspend()
    flow.clear()
    assert changelog.empty()
