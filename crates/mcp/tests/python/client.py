"""Drives countersign-mcp with the official MCP Python SDK (`mcp` on PyPI).

Run by crates/mcp/tests/sdk_clients.rs (and demo.rs), never by hand:

    client.py stdio <server binary> <config file> <approver token> <site url>
    client.py http <mcp url> <client token> <approver token> <site url>
    client.py live <mcp url> <client token> <approver token> <site url>
    client.py propose <mcp url> <client token> <site url>
    client.py elicit <auto|legacy> stdio <server binary> <config file> <approver token> <site url>
    client.py elicit <auto|legacy> http <mcp url> <client token> <approver token> <site url>

`stdio` and `http` run against the fake backend (its action count at
`/fake-backend/actions`); `live` against Chromium and the demo's site,
which counts the clicks it receives at `<site url>clicks`; `propose` only
navigates, observes and proposes, for the screenshot of the approval page;
`elicit` proposes through the SDK's high-level `Client` as a new user
would, in `mode="auto"` (protocol 2026-07-28, where the link comes as an
`input_required` result and the SDK retries) or `mode="legacy"`
(2025-11-25, an elicitation request of the server's own), and counts the
elicitations and the run's proposals.

Checks the whole flow with asserts and prints one JSON object (the tool
list as the SDK received it, and what happened) on its last line.
"""

import json
import logging
import re
import sys

import anyio
import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

SITE = sys.argv[-1]


class CloseWarnings(logging.Handler):
    """Keeps what the SDK's HTTP transport warns of (a failed session close)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


TRANSPORT_WARNINGS = CloseWarnings()
logging.getLogger("mcp.client.streamable_http").addHandler(TRANSPORT_WARNINGS)


ELICITED = []


async def accept_everything(context, params):
    """A client that says yes to every elicitation: it must approve nothing."""
    from mcp_types import ElicitResult

    ELICITED.append(params.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return ElicitResult(action="accept")


def structured(result):
    """The toolset's JSON of a tool result, checked against its text."""
    assert result.structured_content is not None, result
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def code(result):
    body = structured(result)
    assert result.is_error is True, body
    assert body["status"] == "error", body
    return body["error"]["code"]


def approve(approval_url, approver_token):
    """What a person's browser does on the approval page: open the proposal,
    press Approve (a same-origin form post carrying the form's token)."""
    auth = {"authorization": f"Bearer {approver_token}"}
    with httpx2.Client() as http:
        page = http.get(approval_url, headers=auth)
        assert page.status_code == 200, page.status_code
        html = page.text
        form = re.search(r'<form[^>]*action="([^"]+)"[^>]*class="approve"|<form[^>]*class="approve"[^>]*action="([^"]+)"', html)
        assert form, "no approve form"
        action = (form.group(1) or form.group(2)).replace("&amp;", "&")
        rest = html[form.end():]
        token = re.search(r'name="token" value="([^"]+)"', rest).group(1)
        origin = re.match(r"(https?://[^/]+)", approval_url).group(1)
        posted = http.post(
            origin + action,
            headers={**auth, "sec-fetch-site": "same-origin"},
            data={"token": token, "note": ""},
        )
        assert posted.status_code == 303, posted.status_code
        unauthenticated = http.get(approval_url)
        assert unauthenticated.status_code == 401, unauthenticated.status_code
    return origin


def ref_of(snapshot, role, name):
    """The ref the observation gives the line `- role "name" ... [ref=…]`."""
    for line in snapshot.splitlines():
        if line.strip().startswith(f'- {role} "{name}"'):
            found = re.search(r"\[ref=([^\]]+)\]", line)
            if found:
                return found.group(1)
    raise AssertionError(f"no {role} {name!r} in the snapshot:\n{snapshot}")


def site_clicks():
    """The clicks the live demo page counted (its own trusted-click handler
    posts each to the site)."""
    with httpx2.Client() as http:
        answer = http.get(SITE + "clicks")
        assert answer.status_code == 200, answer.status_code
        return answer.json()["clicks"]


def fake_actions(origin, approver_token):
    if LIVE:
        return site_clicks()
    with httpx2.Client() as http:
        answer = http.get(
            origin + "/fake-backend/actions",
            headers={"authorization": f"Bearer {approver_token}"},
        )
        assert answer.status_code == 200
        return answer.json()["actions"]


async def look(session, report):
    """browser_navigate to the site, browser_observe it: the click by ref."""
    landed = structured(await session.call_tool("browser_navigate", {"url": SITE}))
    assert landed["status"] == "ok" and landed["url"] == SITE, landed
    report["navigate"] = landed["status"]
    seen = structured(await session.call_tool("browser_observe", {}))
    assert seen["status"] == "ok" and seen["url"] == SITE, seen
    report["observe"] = seen["status"]
    report["title"] = seen["page_content"]["title"]
    ref = ref_of(seen["page_content"]["snapshot"], "button", "count")
    return {"url": SITE, "method": "click", "ref": ref, "description": "count once"}


async def wait_for_clicks(expected):
    """The live page posts its count after the click: wait (bounded) for it
    to arrive, then report what arrived."""
    if not LIVE:
        return
    with anyio.move_on_after(10):
        while site_clicks() < expected:
            await anyio.sleep(0.05)


async def flow(session, approver_token, report, http_target=None):
    init = await session.initialize()
    report["protocol_version"] = init.protocol_version
    tools = await session.list_tools()
    report["tools"] = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools.tools]

    click = await look(session, report)
    proposed = structured(await session.call_tool("browser_propose", click))
    assert proposed["status"] == "pending", proposed
    link = proposed["approval_url"]
    assert link.endswith("/approvals/proposals/" + proposed["proposal_id"]), link
    # The server asks the client to open the link (URL-mode elicitation);
    # this client accepts, and the proposal stays pending.
    with anyio.move_on_after(10):
        while not ELICITED:
            await anyio.sleep(0.05)
    report["elicited"] = [(e.get("mode"), e.get("url") == link) for e in ELICITED]
    status = structured(await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]}))
    assert status["status"] == "pending" and status["approval_url"] == link, status

    # Acting while pending: there is no grant; any id the client makes up fails.
    pending = await session.call_tool("browser_act", {**click, "approval_id": "apr_" + "0" * 32})
    report["act_while_pending"] = code(pending)
    status = structured(await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]}))
    report["status_after_accept"] = status["status"]

    origin = approve(link, approver_token)
    status = structured(await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]}))
    assert status["status"] == "approved", status
    act = {**click, "approval_id": status["approval_id"]}
    first = structured(await session.call_tool("browser_act", act))
    report["act"] = first["status"]
    report["replay"] = code(await session.call_tool("browser_act", act))
    await wait_for_clicks(1)
    report["actions"] = fake_actions(origin, approver_token)
    report["title_after_act"] = structured(await session.call_tool("browser_observe", {}))["page_content"]["title"]

    # Bad input over the wire: refusals as tool results, unknown tools as
    # JSON-RPC errors, the session alive throughout.
    try:
        await session.call_tool("browser_teleport", {})
        report["unknown_tool"] = "answered"
    except MCPError as error:
        report["unknown_tool"] = error.code
    report["missing_arguments"] = code(await session.call_tool("browser_act", {}))
    report["no_arguments"] = code(await session.call_tool("browser_act", None))
    report["extra_argument"] = code(await session.call_tool("browser_act", {**act, "actor_id": "someone-else"}))
    report["wrong_type"] = code(await session.call_tool("browser_act", {**act, "url": 42}))
    by_selector = {k: v for k, v in click.items() if k != "ref"}
    report["huge_selector"] = code(
        await session.call_tool("browser_propose", {**by_selector, "selector": "a" * 600_000})
    )
    huge = {**by_selector, "selector": "a" * 2_000_000}
    try:
        if http_target is None:
            await session.call_tool("browser_propose", huge, read_timeout_seconds=20)
        else:
            # Over HTTP on a session of its own: the server may close the
            # connection while the body is still being sent, and the SDK
            # then fails the whole session, not only this call.
            url, token = http_target
            async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as other:
                        await other.initialize()
                        await other.call_tool("browser_propose", huge, read_timeout_seconds=20)
        report["huge_payload"] = "answered"
    except MCPError as error:
        report["huge_payload"] = error.code
    except Exception as error:  # the transport may give up on a refused body
        report["huge_payload"] = type(error).__name__
    report["after_bad_input"] = structured(
        await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]})
    )["status"]
    report["actions_at_end"] = fake_actions(origin, approver_token)
    return origin


async def far_down(session, approver_token, report):
    """On a long page, a button 2,500 px down, which the model cannot
    scroll to: proposed by ref, approved, and clicked exactly once."""
    long_page = SITE + "long"
    landed = structured(await session.call_tool("browser_navigate", {"url": long_page}))
    assert landed["status"] == "ok", landed
    seen = structured(await session.call_tool("browser_observe", {}))
    ref = ref_of(seen["page_content"]["snapshot"], "button", "count far down")
    click = {"url": long_page, "method": "click", "ref": ref, "description": "count far down"}
    proposed = structured(await session.call_tool("browser_propose", click))
    report["far_proposed"] = proposed["status"]
    approve(proposed["approval_url"], approver_token)
    status = structured(await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]}))
    assert status["status"] == "approved", status
    before = site_clicks()
    report["far_act"] = structured(await session.call_tool("browser_act", {**click, "approval_id": status["approval_id"]}))["status"]
    await wait_for_clicks(before + 1)
    # Bounded by wait_for_clicks above; a second click would show here.
    await anyio.sleep(0.3)
    report["far_clicks"] = site_clicks() - before
    report["far_title"] = structured(await session.call_tool("browser_observe", {}))["page_content"]["title"]


async def concurrent(url, token, approver_token, report):
    """16 sessions act on one approved grant at once: exactly one `ok`."""
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                click = await look(session, {})
                proposed = structured(await session.call_tool("browser_propose", click))
                origin = approve(proposed["approval_url"], approver_token)
                status = structured(
                    await session.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]})
                )
                act = {**click, "approval_id": status["approval_id"]}
    before = fake_actions(origin, approver_token)
    outcomes = []

    async def one():
        async with httpx2.AsyncClient(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    body = structured(await session.call_tool("browser_act", act))
                    outcomes.append(body["status"] if body["status"] == "ok" else body["error"]["code"])

    async with anyio.create_task_group() as group:
        for _ in range(16):
            group.start_soon(one)
    report["concurrent"] = sorted(outcomes)
    report["concurrent_actions"] = fake_actions(origin, approver_token) - before


async def raw_http(url, token, report):
    """Requests no SDK would send: a repeated key, no token, a wrong token."""
    async with httpx2.AsyncClient() as http:
        body = (
            '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"browser_act",'
            '"arguments":{"approval_id":"apr_1","approval_id":"apr_2"}}}'
        )
        headers = {
            "authorization": f"Bearer {token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        duplicate = await http.post(url, content=body, headers=headers)
        report["duplicate_key"] = [duplicate.status_code, duplicate.json()["error"]["code"]]
        none = await http.post(url, content="{}", headers={"content-type": "application/json"})
        wrong = await http.post(url, content="{}", headers={**headers, "authorization": "Bearer nope"})
        report["unauthenticated"] = [none.status_code, none.text, wrong.status_code, wrong.text]
        try:
            huge = await http.post(url, content=b" " * (2 << 20), headers=headers)
            report["huge_body"] = huge.status_code
        except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError):
            # Reported for the Rust side to refuse: the server must read
            # the rest of the body and answer 413, not reset the connection.
            report["huge_body"] = "closed without an answer"


async def propose_only(url, token, report):
    """Navigate, observe, propose by ref: the approval page to look at."""
    headers = {"authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                click = await look(session, report)
                proposed = structured(await session.call_tool("browser_propose", click))
                assert proposed["status"] == "pending", proposed
                report["approval_url"] = proposed["approval_url"]


def run_proposals(origin, approver_token):
    """The pending proposals the run's page lists, by id."""
    with httpx2.Client() as http:
        page = http.get(
            origin + "/approvals/runs/py-agent/py-run",
            headers={"authorization": f"Bearer {approver_token}"},
        )
        assert page.status_code == 200, page.status_code
        return re.findall(r'<code class="proposal-id">([^<]+)</code>', page.text)


async def elicit(client, approver_token, report):
    """One proposal through the high-level Client, which answers every
    elicitation with accept."""
    report["protocol_version"] = client.protocol_version
    click = await look(client, report)
    proposed = structured(await client.call_tool("browser_propose", click))
    report["proposed"] = proposed["status"]
    link = proposed["approval_url"]
    # On 2025-11-25 the elicitation comes as a request of its own, after
    # the result; on 2026-07-28 before it. Either way a second one would
    # arrive within the wait that follows.
    with anyio.move_on_after(10):
        while not ELICITED:
            await anyio.sleep(0.05)
    await anyio.sleep(0.5)
    report["elicited"] = [(e.get("mode"), e.get("url") == link) for e in ELICITED]
    status = structured(await client.call_tool("browser_proposal_status", {"proposal_id": proposed["proposal_id"]}))
    report["status_after_accept"] = status["status"]
    if client.protocol_version == "2026-07-28":
        # A retry whose request state this server never gave is refused,
        # and makes no proposal.
        try:
            await client.session.call_tool(
                "browser_propose", click, input_responses={}, request_state="forged", allow_input_required=True
            )
            report["forged_state"] = "answered"
        except MCPError as error:
            report["forged_state"] = error.code
    origin = re.match(r"(https?://[^/]+)", link).group(1)
    report["proposals"] = run_proposals(origin, approver_token) == [proposed["proposal_id"]]
    report["proposal_count"] = len(run_proposals(origin, approver_token))


async def elicit_main(report):
    _, _, mode, transport, *rest = sys.argv
    if transport == "stdio":
        binary, config, approver_token, _site = rest
        server = StdioServerParameters(command=binary, args=["--stdio", "--config", config])
        async with Client(server, mode=mode, elicitation_callback=accept_everything) as client:
            await elicit(client, approver_token, report)
        return
    url, token, approver_token, _site = rest
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}) as http:
        server = streamable_http_client(url, http_client=http)
        async with Client(server, mode=mode, elicitation_callback=accept_everything) as client:
            await elicit(client, approver_token, report)


LIVE = sys.argv[1] == "live"


async def main():
    mode = sys.argv[1]
    report = {}
    if mode == "elicit":
        await elicit_main(report)
    elif mode == "propose":
        _, _, url, token, _site = sys.argv
        await propose_only(url, token, report)
    elif mode == "stdio":
        _, _, binary, config, approver_token, _site = sys.argv
        params = StdioServerParameters(command=binary, args=["--stdio", "--config", config])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, elicitation_callback=accept_everything) as session:
                await flow(session, approver_token, report)
    else:
        _, _, url, token, approver_token, _site = sys.argv
        headers = {"authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write, elicitation_callback=accept_everything) as session:
                    await flow(session, approver_token, report, (url, token))
                    if LIVE:
                        await far_down(session, approver_token, report)
        report["transport_warnings"] = TRANSPORT_WARNINGS.messages
        if not LIVE:
            await raw_http(url, token, report)
            await concurrent(url, token, approver_token, report)
    print(json.dumps(report))


anyio.run(main)
