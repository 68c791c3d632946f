"""README's ``client.send(queue, value, headers={...})``: a header name or str value with a
lone surrogate has no UTF-8 bytes to send; it is a ConfigError naming the header (it was a
UnicodeEncodeError from deep inside), before anything is written."""

from __future__ import annotations

import re

import pytest

import kmq
from kmq.send_args import check_headers


@pytest.mark.parametrize("headers, named", [({"\udcff": "x"}, "header name"),
                                            ({"h": "\udcff"}, "header 'h' value")])
def test_a_header_name_or_value_that_is_no_utf8_text_is_refused_naming_it(headers, named):
    with pytest.raises(kmq.ConfigError, match=re.escape(named) + ".* not valid UTF-8 text"):
        check_headers(headers)


def test_header_bytes_and_ordinary_text_pass_as_before():
    assert check_headers({"a": "é", "b": b"\xff"}) == [("a", "é".encode()), ("b", b"\xff")]
