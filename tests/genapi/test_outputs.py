"""The download rule for results: the API's origin, else https on public addresses.

Downloads go through the real pooled client (``output_client``) against the API emulator; the
addresses refused are loopback ones, so nothing leaves 127.0.0.1 whatever happens.
"""

import ipaddress
import socket

import httpx2 as httpx
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from bot.clock import ManualClock
from bot.discord.delivery import download
from bot.genapi.outputs import (
    DownloadRefused,
    PublicResolver,
    ip_literal,
    is_public_address,
    normalise_host,
    output_client,
    resolves_privately,
)
from bot.sandbox import GenApiEmulator


async def image_output(api: GenApiEmulator) -> str:
    """Make a synchronous image and return its output URL (on the emulator's origin)."""
    key = api.create_key()
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{api.base_url}/image/generate",
            headers={"Authorization": f"Bearer {key}"},
            json={"model": "black-forest-labs/flux-schnell", "prompt": "a kite"},
        )
    return str(response.json()["outputs"][0])


def file_requests(api: GenApiEmulator, url: str) -> int:
    path = httpx.URL(url).path
    return sum(1 for r in api.requests if r.path.split("?")[0] == path)


async def test_an_output_on_the_apis_origin_is_downloaded() -> None:
    async with GenApiEmulator(clock=ManualClock().monotonic) as api:
        url = await image_output(api)
        async with output_client(api.base_url) as http:
            assert (await download(http, url, 10_000)).startswith(b"\x89PNG")


async def test_a_redirect_to_another_origin_is_refused_before_anything_is_sent_there() -> None:
    async with GenApiEmulator(clock=ManualClock().monotonic) as api:
        url = await image_output(api)
        # The same emulator under another origin: a plain client would follow and get the file.
        api.redirect_files(api.origin.replace("127.0.0.1", "localhost"))
        async with output_client(api.base_url) as http:
            with pytest.raises(DownloadRefused) as refused:
                await download(http, url, 10_000)
        assert refused.value.reason == "its link redirects to another site"
        assert file_requests(api, url) == 1  # the redirect only, never its target


async def test_a_redirect_within_the_origin_is_followed() -> None:
    async with GenApiEmulator(clock=ManualClock().monotonic) as api:
        url = await image_output(api)
        api.redirect_files(api.origin)
        async with output_client(api.base_url) as http:
            assert (await download(http, url, 10_000)).startswith(b"\x89PNG")
        assert file_requests(api, url) == 2


@pytest.mark.parametrize(
    ("link", "reason"),
    [
        ("http://{host}/files/x.png", "its link is not https"),
        ("https://127.0.0.1:{port}/files/x.png", "private network address"),
        ("https://127.1:{port}/files/x.png", "private network address"),
        ("https://2130706433:{port}/files/x.png", "private network address"),
        ("https://[::1]:{port}/files/x.png", "private network address"),
        ("https://[::ffff:127.0.0.1]:{port}/files/x.png", "private network address"),
        ("https://169.254.169.254/latest/meta-data/", "private network address"),
        ("https://10.0.0.8/x.png", "private network address"),
        # A name is resolved first, and its loopback addresses are never connected to.
        ("https://localhost:{port}/files/x.png", "private network address"),
    ],
)
async def test_another_origin_must_be_https_on_a_public_address(link: str, reason: str) -> None:
    async with GenApiEmulator(clock=ManualClock().monotonic) as api:
        port = httpx.URL(api.origin).port
        target = link.format(host=f"localhost:{port}", port=port)
        async with output_client("https://api.example/api/v1") as http:
            with pytest.raises(DownloadRefused) as refused:
                await download(http, target, 10_000)
        assert reason in refused.value.reason
        assert not [r for r in api.requests if r.path.startswith("/files/")]


async def test_without_an_api_origin_the_sandboxs_own_links_are_refused_too() -> None:
    async with GenApiEmulator(clock=ManualClock().monotonic) as api:
        url = await image_output(api)
        async with output_client(None) as http:
            with pytest.raises(DownloadRefused):
                await download(http, url, 10_000)


class FixedResolver(AbstractResolver):
    """Answers every name with the given addresses (a DNS server we control)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        pass


async def test_the_resolver_keeps_only_public_addresses() -> None:
    mixed = PublicResolver(FixedResolver("93.184.215.14", "127.0.0.1", "fd00::1"))
    assert [r["host"] for r in await mixed.resolve("cdn.example", 443)] == ["93.184.215.14"]
    rebinding = PublicResolver(FixedResolver("169.254.169.254", "::1"))
    with pytest.raises(DownloadRefused):
        await rebinding.resolve("cdn.example", 443)


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),  # carrier-grade NAT
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        # Forms that carry an IPv4 address; Python 3.11-3.13 disagree on their is_global.
        ("::ffff:8.8.8.8", False),  # IPv4-mapped: never a host's own address
        ("::127.0.0.1", False),  # IPv4-compatible (deprecated, RFC 4291 2.5.5.1)
        ("::8.8.8.8", False),
        ("64:ff9b::7f00:1", False),  # NAT64 of 127.0.0.1 (RFC 6052)
        ("64:ff9b::a00:7", False),  # NAT64 of 10.0.0.7
        ("64:ff9b::5db8:d70e", False),  # NAT64 of a public host: still a translator's form
        ("64:ff9b:1::5db8:d70e", False),  # local-use NAT64 (RFC 8215): a private translator
    ],
)
def test_public_addresses(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


@pytest.mark.parametrize(
    ("typed", "host"),
    [
        ("ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", "localhost"),  # enclosed letters
        ("１２７。０。０。１", "127.0.0.1"),  # full-width digits, ideographic full stops
        ("１２７．１", "127.1"),
        ("ＬＯＣＡＬＨＯＳＴ．", "localhost."),
        ("bücher.example", "xn--bcher-kva.example"),
        ("CDN.Example", "cdn.example"),
        ("under_score.example", "under_score.example"),  # ASCII: only lowercased
        ("[::１]", "::1"),
    ],
)
def test_hosts_are_normalised_as_resolvers_read_them(typed: str, host: str) -> None:
    assert normalise_host(typed) == host


def test_a_host_idna_cannot_read_is_refused() -> None:
    with pytest.raises(ValueError, match="not a valid host name"):
        normalise_host("exa\u2044mple.com")  # a fraction slash: no label may hold it
    with pytest.raises(ValueError, match="not a valid host name"):
        normalise_host("ｅｘａｍｐｌｅ。。com")


async def test_a_name_resolving_to_any_private_address_is_private() -> None:
    async def resolve(*found: str) -> bool:
        async def fixed(host: str) -> list[str]:
            return list(found)

        return await resolves_privately("cdn.example", fixed)

    assert await resolve("93.184.215.14") is False
    assert await resolve("93.184.215.14", "10.0.0.7") is True  # the service may pick either
    assert await resolve("::ffff:127.0.0.1") is True
    assert await resolve() is False  # unknown here: the service resolves it in its network

    async def failing(host: str) -> list[str]:
        raise OSError("no such host")

    assert await resolves_privately("cdn.example", failing) is False


def test_ip_literals_include_the_legacy_forms_resolvers_accept() -> None:
    assert ip_literal("127.1") == ipaddress.ip_address("127.0.0.1")
    assert ip_literal("0x7f.0.0.1") == ipaddress.ip_address("127.0.0.1")
    assert ip_literal("2130706433") == ipaddress.ip_address("127.0.0.1")
    assert ip_literal("[::1]") == ipaddress.ip_address("::1")
    assert ip_literal("cdn.example") is None
