"""End to end through a real load balancer: two replicas of ``streamlit run app.py``
behind HAProxy (tools/balancer.py), learners in separate Chromium contexts.

Each learner's page, static files, uploads and WebSocket stay on one replica (the
``X-Lnviz-Replica`` header HAProxy adds to every response, the WebSocket's handshake included,
and the ``lnviz_replica`` cookie agree); the learners spread over the replicas; a learner's
RMSNorm link opens the view it names (checked here, on the page it opened: the Explorer's only
check of that link in a browser); uploads work through the balancer; and when a learner's
replica is killed, the tab reconnects to another one and its URL restores the view, while the
page says what only the lost server held.

Needs what the other browser tests need, plus Debian's ``haproxy``.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from browserutil import (
    ALERT,
    CHARTS,
    CHECK_BADGE,
    TIMEOUT_MS,
    assert_no_exception,
    chart_title,
    missing,
    norm_option,
    shot,
    wait_idle,
)
from conftest import new_context

from lnviz.ui.source import LOST_UPLOAD
from tools.balancer import COOKIE, REPLICA_HEADER, Balancer

try:
    from playwright.sync_api import Browser, BrowserContext, Page, expect
except ImportError:  # the browser fixture skips (or fails) the tests
    Browser = BrowserContext = Page = None

pytestmark = pytest.mark.browser

#: Two: enough to see learners spread and a killed replica's learners move to another (a third
#: replica and a fourth learner cost the suite a server start and a page load).
REPLICAS = 2
#: One browser context per learner: more learners than replicas, so one replica has two.
LEARNERS = 3
#: Each learner's own view, in the URL it opened.
VIEWS = ["?norm=LayerNorm", "?norm=GroupNorm", "?norm=RMSNorm&eps=1e-3"]


def _replica(headers: dict[str, str]) -> str | None:
    return {k.lower(): v for k, v in headers.items()}.get(REPLICA_HEADER.lower())


class Learner:
    """One browser context on the Explorer, recording which replica answered what."""

    def __init__(self, browser: Browser, base: str, view: str) -> None:
        self.base, self.view = base, view
        self.context: BrowserContext = new_context(browser)
        self.page: Page = self.context.new_page()
        #: (replica, url) of every HTTP response from the balancer (not the browser's cache)
        self.http: list[tuple[str | None, str]] = []
        #: the replica named in each WebSocket handshake's response, in order
        self.sockets: list[str | None] = []
        self._cached: set[str] = set()
        cdp = self.context.new_cdp_session(self.page)
        cdp.on("Network.requestServedFromCache", lambda e: self._cached.add(e["requestId"]))
        cdp.on("Network.responseReceived", self._response)
        cdp.on("Network.webSocketHandshakeResponseReceived", self._handshake)
        cdp.send("Network.enable")
        self.cdp = cdp

    def _response(self, event: dict) -> None:
        # a file from the browser's cache (Streamlit's static files are cached for good) shows
        # the headers of its first download: only what the balancer answered now counts
        response = event["response"]
        if (response["url"].startswith(self.base) and event["requestId"] not in self._cached
                and not response.get("fromDiskCache") and not response.get("fromPrefetchCache")):
            self.http.append((_replica(response["headers"]), response["url"]))

    def _handshake(self, event: dict) -> None:
        self.sockets.append(_replica(event["response"]["headers"]))

    def cookie(self) -> str | None:
        return next((c["value"] for c in self.context.cookies() if c["name"] == COOKIE), None)

    def mark(self) -> tuple[int, int]:
        """Where the records stand now, for :meth:`replicas_seen`."""
        return len(self.http), len(self.sockets)

    def replicas_seen(self, since: tuple[int, int] = (0, 0)) -> set[str | None]:
        """The replicas that answered HTTP requests or WebSocket handshakes since ``since``."""
        return {name for name, _ in self.http[since[0]:]} | set(self.sockets[since[1]:])


@pytest.fixture(scope="module")
def balancer(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Balancer]:
    if shutil.which("haproxy") is None and shutil.which("haproxy", path="/usr/sbin") is None:
        missing("a `haproxy` executable (apt-get install haproxy)")
    workdir = tmp_path_factory.mktemp("balancer")
    try:
        with Balancer(REPLICAS, workdir=workdir) as lb:
            yield lb
    except RuntimeError as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture(scope="module")
def learners(browser: Browser, balancer: Balancer) -> Iterator[list[Learner]]:
    """Every learner on the Explorer with their own view; the pages load side by side."""
    group = [Learner(browser, balancer.url, view) for view in VIEWS[:LEARNERS]]
    try:
        for learner in group:  # one after another, so that round robin deals them out
            learner.page.goto(f"{balancer.url}/explorer{learner.view}")
        for learner in group:
            expect(learner.page.locator(CHARTS).nth(2)).to_be_visible(timeout=TIMEOUT_MS)
            wait_idle(learner.page)
            assert_no_exception(learner.page)
        yield group
    finally:
        for learner in group:
            learner.context.close()


def test_each_learner_stays_on_one_replica_and_learners_spread(learners: list[Learner],
                                                                balancer: Balancer) -> None:
    names = {r.name for r in balancer.replicas}
    for learner in learners:
        assert learner.sockets, "the page opened no WebSocket through the balancer"
        seen = learner.replicas_seen()
        assert len(seen) == 1 and seen <= names, (
            f"{learner.view}: responses came from {seen}; WebSocket(s) {learner.sockets}; "
            f"first responses {learner.http[:5]}")
        assert learner.cookie() in seen, (learner.cookie(), seen)
        expect(learner.page.get_by_text(CHECK_BADGE)).to_be_visible()
    homes = [learner.cookie() for learner in learners]
    assert set(homes) == names, f"{LEARNERS} learners over {REPLICAS} replicas landed on {homes}"


def test_a_link_to_rmsnorm_opens_its_view(learners: list[Learner]) -> None:
    """The RMSNorm learner's link (norm=RMSNorm, eps=1e-3: ε as the app writes 0.001), checked
    on the page it opened (no page load of its own): RMSNorm chosen and drawn, its captions, the
    live ε at 1e-3 and no β box in the panel, and the code with eps = 0.001."""
    page = next(learner.page for learner in learners
                if learner.view == "?norm=RMSNorm&eps=1e-3")
    expect(chart_title(page, "output y (RMSNorm)")).to_be_visible()
    expect(norm_option(page, "RMSNorm")).to_be_checked()
    expect(norm_option(page, "LayerNorm")).not_to_be_checked()
    expect(page.locator('[data-testid="stCaptionContainer"]')
           .filter(has_text="RMSNorm: LayerNorm without subtracting μ")).to_be_visible()
    expect(page.get_by_text("RMSNorm has no β: it shifts nothing.")).to_be_visible()
    expect(page.locator(".lv-root [data-show=eps]")).to_have_text("1e-3")  # the live ε
    expect(page.locator(".lv-root [data-control-box=beta]")).to_be_hidden()
    expect(page.locator('[data-testid="stCode"]')
           .filter(has_text="F.rms_norm(")).to_contain_text("eps = 0.001")
    expect(page).to_have_url(re.compile(r"[?&]norm=RMSNorm(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]eps=1e-3(&|$)"))
    assert_no_exception(page)
    shot(page, "explorer-url-rmsnorm")


def _dropzone(page: Page):
    return page.locator('[data-testid="stFileUploaderDropzoneInput"], '
                        '[data-testid="stFileUploader"] input[type=file]').first


def _tensor_files(folder: Path, accepted: str) -> list[Path]:
    """A .npy, and a .safetensors where the Explorer's uploader takes one (else a .npz): the
    same 6 × 5 tensor."""
    values = (np.arange(30, dtype=np.float32).reshape(6, 5) - 14.5) / 4
    npy = folder / "acts.npy"
    np.save(npy, values)
    if ".safetensors" in accepted:
        from safetensors.numpy import save_file
        other = folder / "acts.safetensors"
        save_file({"acts": values}, str(other))
    else:
        other = folder / "acts.npz"
        np.savez(other, acts=values)
    return [npy, other]


def test_uploads_work_through_the_balancer(learners: list[Learner], tmp_path: Path) -> None:
    """An upload is an HTTP PUT that must reach the replica holding the session's WebSocket
    (elsewhere it fails with HTTP 400): it does, and the Explorer shows the tensor."""
    learner = learners[0]
    page = learner.page
    before = learner.mark()
    page.get_by_role("radiogroup", name="Data source").get_by_role(
        "radio", name=re.compile("^Upload")).click()
    dropzone = _dropzone(page)
    expect(dropzone).to_be_attached()
    wait_idle(page)
    for path in _tensor_files(tmp_path, dropzone.get_attribute("accept") or ""):
        with page.expect_response(lambda r: "/_stcore/upload_file/" in r.url
                                  and r.request.method == "PUT") as put:
            dropzone.set_input_files(str(path))
        assert put.value.ok, (path.name, put.value.status)  # 204 No Content
        expect(page.get_by_text("Tensor (6, 5) in layout NC")).to_be_visible()
        expect(page.locator(CHARTS).nth(2)).to_be_visible()
        expect(page.get_by_text(CHECK_BADGE)).to_be_visible()
        wait_idle(page)
        assert_no_exception(page)
    assert learner.replicas_seen(before) == {learner.cookie()}
    shot(page, "balancer-upload")


def _reconnected(learner: Learner, sockets_before: int, lost: str) -> str:
    """Wait until the tab's WebSocket is open again, through the balancer, on a replica other
    than ``lost``; the replica it is on now."""
    page = learner.page
    page.wait_for_function("() => true")  # let the CDP events queued so far arrive
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while len(learner.sockets) <= sockets_before and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert len(learner.sockets) > sockets_before, f"{learner.view}: no new WebSocket"
    expect(page.locator('[data-testid="stApp"]')).to_have_attribute(
        "data-test-connection-state", "CONNECTED")
    now = set(learner.sockets[sockets_before:])
    assert len(now) == 1 and lost not in now and learner.cookie() in now, (now, learner.cookie())
    return learner.cookie()


def test_a_killed_replica_s_learners_reconnect_and_keep_their_view(
        learners: list[Learner], balancer: Balancer) -> None:
    """Kill the replica that serves the uploader and the RMSNorm learner. Both tabs reconnect
    through the balancer to other replicas (Streamlit's client keeps showing the last page and
    reruns on the next interaction). The RMSNorm learner's next move runs on the new replica
    with ε as it was, and a reload restores the view from the URL; the uploader's next move
    (or, on a busy machine, the rerun Streamlit's client asks for on reconnecting) says the
    file must be uploaded again (the uploader still lists it). The others are
    untouched."""
    uploader, rms = learners[0], learners[2]
    home = uploader.cookie()
    assert rms.cookie() == home, "round robin over 2 replicas puts learners 1 and 3 together"
    others = [other for other in learners if other.cookie() != home]
    marks = {id(learner): len(learner.sockets) for learner in learners}

    balancer.kill(home)
    new_homes = {id(learner): _reconnected(learner, marks[id(learner)], home)
                 for learner in (rms, uploader)}

    page = rms.page
    since = rms.mark()
    norm_option(page, "BatchNorm").click()  # the first run of a new session there
    expect(chart_title(page, "output y (BatchNorm)")).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    expect(page).to_have_url(re.compile(r"[?&]norm=BatchNorm(&|$)"))
    expect(page).to_have_url(re.compile(r"[?&]eps=1e-3(&|$)"))
    page.reload()
    expect(chart_title(page, "output y (BatchNorm)")).to_be_visible(timeout=TIMEOUT_MS)
    wait_idle(page)
    assert_no_exception(page)
    expect(norm_option(page, "BatchNorm")).to_be_checked()
    expect(page.locator(".lv-root [data-show=eps]")).to_have_text("1e-3")  # the live ε
    assert rms.replicas_seen(since) == {new_homes[id(rms)]}
    shot(page, "balancer-reconnected-view")

    # the next move: the sidebar's random seed, which every state of the page shows (a busy
    # machine may already have rerun the page on reconnecting, which hides the upload's
    # controls; a quiet one still shows the last view)
    page = uploader.page
    page.locator('[data-testid="stSidebar"] .st-key-seed [data-testid="stNumberInputStepUp"]')\
        .click()
    expect(page.locator(ALERT).filter(has_text="Upload a .npy, .npz, .safetensors, .pt or .pth"))\
        .to_be_visible(timeout=TIMEOUT_MS)
    expect(page.get_by_text(LOST_UPLOAD)).to_be_visible()
    expect(page.locator(CHARTS)).to_have_count(0)
    wait_idle(page)
    assert_no_exception(page)
    shot(page, "balancer-reconnected-upload-lost")

    for other in others:
        assert other.cookie() != home and len(other.sockets) == marks[id(other)]
        expect(other.page.get_by_text(CHECK_BADGE)).to_be_visible()
        assert_no_exception(other.page)
