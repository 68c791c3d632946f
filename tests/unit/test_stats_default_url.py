"""``kmq stats`` without ``--url`` asks the tracker at KMQ_WEB_HOST:KMQ_WEB_PORT: loopback
when that host is a wildcard however written (it knew only 0.0.0.0, :: and the empty
string: KMQ_WEB_HOST=::0 made it ask http://::0:6066), an IPv6 address in brackets."""

from __future__ import annotations

import pytest

from kmq.setting_values import web_url


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "", "::0", "[::]", "0", " 0.0.0.0 ", "::ffff:0.0.0.0"])
def test_a_wildcard_host_is_asked_on_loopback(host):
    assert web_url(host, 6066) == "http://127.0.0.1:6066"


@pytest.mark.parametrize("host, url", [("10.1.2.3", "http://10.1.2.3:7000"), ("::1", "http://[::1]:7000"),
                                       ("::ffff:127.0.0.1", "http://[::ffff:127.0.0.1]:7000"),
                                       ("tracker-0.svc", "http://tracker-0.svc:7000")])
def test_other_hosts_are_asked_as_given(host, url):
    assert web_url(host, 7000) == url
