// A call that waits for a person, cancelled by its client: the TypeScript
// SDK aborts it (notifications/cancelled) once its first progress
// notification shows it waiting; then the person approves. Nothing may
// happen on the page until the same call is made again. Run by
// crates/mcp/tests/playwright_side_by_side.rs:
//
//   node playwright_cancel.mjs <server binary> <config file> <site url> <approver token>
//
// Prints one JSON object on its last line: what the site recorded after
// the cancelled call and the approval, and after the retry.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { approveOnPage } from "./approve.mjs";

const [binary, config, site, approverToken] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: binary,
  args: ["--playwright-compat", "--stdio", "--config", config],
  stderr: "inherit",
});
const client = new Client({ name: "countersign-playwright-cancel", version: "1.0.0" });
await client.connect(transport);
const record = async () => (await fetch(new URL("/record", site))).json();
const report = {};

await client.callTool({ name: "browser_navigate", arguments: { url: site } });
const snapshot = (await client.callTool({ name: "browser_snapshot", arguments: {} })).content[0].text;
const line = snapshot.split("\n").find((l) => l.trim().startsWith('- button "Count"'));
const target = /\[ref=([^\]]+)\]/.exec(line ?? "")[1];
const click = { element: "Count button", target };

const abort = new AbortController();
let link;
const waiting = client
  .callTool({ name: "browser_click", arguments: click }, undefined, {
    signal: abort.signal,
    timeout: 120000,
    onprogress: (progress) => {
      link ??= /(https?:\/\/\S+\/approvals\/proposals\/[A-Za-z0-9_-]+)/.exec(progress.message ?? "")?.[1];
      abort.abort("the user pressed stop");
    },
  })
  .then(
    () => "answered",
    (error) => `rejected: ${error.name}`,
  );
report.cancelled_call = await waiting;
report.link = Boolean(link);
await approveOnPage(link, approverToken);
// Longer than the server's poll of the proposal: a wait still running
// would have seen the approval and acted by now.
await new Promise((resolve) => setTimeout(resolve, 1500));
report.after_cancel = await record();

const again = await client.callTool({ name: "browser_click", arguments: click }, undefined, { timeout: 120000 });
report.retry_error = again.isError === true;
report.retry_decided_by = again.structuredContent?.decided_by;
report.after_retry = await record();
await client.close();
console.log(JSON.stringify(report));
