"""kmq.consumer.fetched: a fetch's records sorted out in C keep exactly the queue's own,
per partition and in offset order; everything else (other queues', keyless, purged)
is left to be committed past, and nothing is lost or taken twice."""

from confluent_kafka import Message as KafkaMessage
from hypothesis import given
from hypothesis import strategies as st

from kmq.consumer import fetched

KEYS = st.sampled_from([b"q", b"q", b"q", b"other", b"q2", None])


@st.composite
def fetches(draw):
    """Records of one fetch: per partition in offset order (as librdkafka hands them over),
    the partitions interleaved, and purge floors."""
    parts = draw(st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True))
    recs = []
    for p in parts:
        offsets = sorted(draw(st.sets(st.integers(0, 300), max_size=40)))
        recs += [KafkaMessage(topic="t", partition=p, offset=o, key=draw(KEYS)) for o in offsets]
    order = draw(st.permutations(range(len(recs))))
    # Interleave partitions, keeping each one's offset order.
    by_part = {p: [r for r in recs if r.partition() == p] for p in parts}
    mixed = []
    for i in order:
        p = recs[i].partition()
        mixed.append(by_part[p].pop(0))
    purged = draw(st.dictionaries(st.sampled_from(parts), st.integers(0, 300), max_size=2))
    return mixed, set(parts), purged


@given(fetches())
def test_ours_are_exactly_the_queues_records_above_the_floor(fetch):
    recs, assigned, purged = fetch
    ours_by_part, others = fetched.split(recs, b"q", assigned, purged)

    def mine(r):
        return r.key() == b"q" and r.offset() >= purged.get(r.partition(), 0)

    for p, ours in ours_by_part.items():
        assert ours == [r for r in recs if r.partition() == p and mine(r)]
    taken = [r for ours in ours_by_part.values() for r in ours]
    assert sorted(map(id, taken + others)) == sorted(map(id, recs))  # each once, none lost
    assert not [r for r in others if mine(r)]


@given(st.sets(st.integers(0, 200_000), min_size=1, max_size=200))
def test_relative_offsets_and_range_cuts(offsets):
    recs = [KafkaMessage(topic="t", partition=0, offset=o, key=b"q") for o in sorted(offsets)]
    start = recs[0].offset()
    assert fetched.rels_of(recs, start) == [o - start for o in sorted(offsets)]
    chunks = fetched.within_range_len(recs)
    assert [r for c in chunks for r in c] == recs
    assert all(c[-1].offset() - c[0].offset() < fetched.M.MAX_RANGE_LEN for c in chunks)
