"""The tests of test_verbs.py again, on shared queues (`dispatch="shared"`): the tracker's
dispatcher hands the messages out; every verb must behave exactly as in partition mode."""

import pytest

from tests.integration.test_verbs import *  # noqa: F401,F403 - the same tests, collected here too
from tests.integration.test_verbs import client  # noqa: F401 - the module's client fixture


@pytest.fixture
def queue(queue, client):  # noqa: F811 - the same queue, made shared before the test uses it
    client.configure_queue(queue, dispatch="shared")
    return queue
