"""docs/web.md's claims about the queue list's parameters and the token, checked on the views'
pure parts (no broker, no HTTP): a bad request is refused naming what to send instead.

Against a running tracker: tests/integration/test_web_claims.py."""

from types import SimpleNamespace

import pytest

from kmq.errors import PermissionDeniedError
from web import api, paging


def request(**query: str) -> SimpleNamespace:
    return SimpleNamespace(query=query, headers={}, path="/kmq/api/queues")


@pytest.mark.parametrize("name", ["sort_by", "Limit", "page", "orderby"])
def test_an_unknown_list_parameter_is_refused_naming_it_and_the_ones_there_are(name):
    # `?sort_by=depth` was answered 200, sorted by name: the misspelling went unnoticed.
    with pytest.raises(ValueError, match=rf"{name}=.*unknown parameter.*limit, offset, sort, order, prefix"):
        paging._page_params(request(**{name: "depth"}))


def test_the_list_defaults_are_the_documented_ones():
    p = paging._page_params(request())
    assert (p["limit"], p["offset"], p["sort"], p["order"], p["prefix"]) == (100, 0, "queue", "asc", "")
    assert paging._page_params(request(sort="depth"))["order"] == "desc"  # numbers: biggest first


def test_a_request_without_a_token_is_told_the_header_to_send(monkeypatch):
    # It was told "KMQ_TOKEN or token=...": the SDK's settings, not what an HTTP caller sends.
    monkeypatch.setattr(api, "settings", api.settings.replace(auth="on", admin_token="a" * 32))
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Basic abc"}):
        with pytest.raises(PermissionDeniedError, match=r"Authorization: Bearer <token>"):
            api.caller_of(SimpleNamespace(headers=headers, query={}, path="/kmq/api/queues"))
    admin = api.caller_of(SimpleNamespace(headers={"Authorization": "Bearer " + "a" * 32}, query={},
                                          path="/kmq/api/queues"))
    assert admin.admin


@pytest.mark.parametrize("value", ["+5", " 5", "5 ", "5_0", "1_0", "\uff15", "\u0967", "0x10", "1e3", "1.5", ""])
def test_limit_and_offset_take_ascii_digits_only(value):
    # An audit: int() took "+5", " 5", "5_0" (as 50) and fullwidth or Devanagari digits: 200s.
    for name in ("limit", "offset"):
        with pytest.raises(ValueError, match=rf"{name}=.*give a whole number"):
            paging._page_params(request(**{name: value}))


def test_a_queues_detail_refuses_any_parameter_naming_it():
    # It answered 200 as if ?x=1 were not there, while the list refused unknown parameters.
    assert paging.detail_params_error({}) is None
    assert paging.detail_params_error({"x": "1"}) == "x='1': unknown parameter; a queue's detail takes none"


def test_a_peer_that_failed_is_said_in_words_never_an_empty_string():
    # An audit: a stopped worker was listed as "http://...: " (a timeout's str() is empty).
    from web.peer_requests import PEER_TIMEOUT_S, peer_failure
    assert peer_failure(TimeoutError()) == f"did not answer within {PEER_TIMEOUT_S:g} s"
    assert peer_failure(ConnectionResetError()) == "ConnectionResetError"
    assert peer_failure(OSError("refused")) == "OSError: refused"
