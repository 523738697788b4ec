// Drives countersign-mcp with the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk). Run by crates/mcp/tests/node_client.rs:
//
//   node client.mjs stdio <server binary> <config file> <approver token> <site url>
//   node client.mjs http <mcp url> <client token> <approver token> <site url>
//
// Prints one JSON object (the tool list as the SDK received it, and what
// happened) on its last line.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { approveOnPage } from "./approve.mjs";

const [mode, target, secret, approverToken, site] = process.argv.slice(2);

function assert(condition, what) {
  if (!condition) throw new Error(`assertion failed: ${what}`);
}

function code(result) {
  assert(result.isError === true, "a refusal is a tool result with isError");
  return result.structuredContent.error.code;
}

async function actions(origin) {
  const answer = await fetch(origin + "/fake-backend/actions", {
    headers: { authorization: `Bearer ${approverToken}` },
  });
  return (await answer.json()).actions;
}

const transport =
  mode === "stdio"
    ? new StdioClientTransport({ command: target, args: ["--stdio", "--config", secret], stderr: "ignore" })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { authorization: `Bearer ${secret}` } },
      });
const client = new Client({ name: "countersign-node-test", version: "1.0.0" });
await client.connect(transport);
const report = {};
report.tools = (await client.listTools()).tools;

const landed = (await client.callTool({ name: "browser_navigate", arguments: { url: site } })).structuredContent;
assert(landed.status === "ok" && landed.url === site, `navigated: ${JSON.stringify(landed)}`);
report.navigate = landed.status;
const seen = (await client.callTool({ name: "browser_observe", arguments: {} })).structuredContent;
report.observe = seen.status;
const line = seen.page_content.snapshot.split("\n").find((l) => l.trim().startsWith('- button "count"'));
const ref = /\[ref=([^\]]+)\]/.exec(line ?? "")?.[1];
assert(ref, `a ref for the count button in ${seen.page_content.snapshot}`);
const CLICK = { url: site, method: "click", ref };

const proposed = (await client.callTool({ name: "browser_propose", arguments: CLICK })).structuredContent;
assert(proposed.status === "pending", "proposal pending");
const pending = await client.callTool({
  name: "browser_act",
  arguments: { ...CLICK, approval_id: "apr_" + "0".repeat(32) },
});
report.act_while_pending = code(pending);
const origin = await approveOnPage(proposed.approval_url, approverToken);
const status = (
  await client.callTool({ name: "browser_proposal_status", arguments: { proposal_id: proposed.proposal_id } })
).structuredContent;
assert(status.status === "approved", "approved after the page");
const act = { ...CLICK, approval_id: status.approval_id };
report.act = (await client.callTool({ name: "browser_act", arguments: act })).structuredContent.status;
report.replay = code(await client.callTool({ name: "browser_act", arguments: act }));
try {
  await client.callTool({ name: "browser_teleport", arguments: {} });
  report.unknown_tool = "answered";
} catch (error) {
  report.unknown_tool = error.code;
}
report.extra_argument = code(await client.callTool({ name: "browser_act", arguments: { ...act, run_id: "x" } }));
report.actions = await actions(origin);
if (mode !== "stdio") {
  // What the SDK does when a client ends its session: a DELETE, which
  // throws unless the server answers 2xx (or 405).
  try {
    await transport.terminateSession();
    report.terminated = transport.sessionId === undefined ? "closed" : "kept";
  } catch (error) {
    report.terminated = String(error.message);
  }
}
await client.close();
console.log(JSON.stringify(report));
