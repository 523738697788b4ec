// Runs one sequence of Playwright MCP tool calls, with the official MCP
// TypeScript SDK, against a server started over stdio: the real
// @playwright/mcp, or countersign-mcp --playwright-compat. Run by
// crates/mcp/tests/playwright_side_by_side.rs:
//
//   node playwright_scenarios.mjs '<{"command": …, "args": […]}>' <site url> [approver token]
//
// With an approver token, every call that waits for a person is approved
// on the approval page whose link its progress notification carries, as
// a person reading the notification would. Prints one JSON object on its
// last line: the tool list, each step's outcome, and the site's own
// record of what happened.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { approveOnPage } from "./approve.mjs";

const [serverJson, site, approverToken] = process.argv.slice(2);
const server = JSON.parse(serverJson);

const transport = new StdioClientTransport({ command: server.command, args: server.args, stderr: "inherit" });
const client = new Client({ name: "countersign-playwright-scenarios", version: "1.0.0" });
await client.connect(transport);
const report = { steps: [], progress: 0, approved: 0 };
report.tools = (await client.listTools()).tools.map((tool) => ({
  name: tool.name,
  required: tool.inputSchema.required ?? [],
}));

const approvals = new Set();
const pending = [];

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args }, undefined, {
    timeout: 120000,
    onprogress: (progress) => {
      report.progress += 1;
      const link = /(https?:\/\/\S+\/approvals\/proposals\/[A-Za-z0-9_-]+)/.exec(progress.message ?? "")?.[1];
      if (link && approverToken && !approvals.has(link)) {
        approvals.add(link);
        pending.push(approveOnPage(link, approverToken).then(() => (report.approved += 1)));
      }
    },
  });
  const text = result.content?.find((c) => c.type === "text")?.text ?? "";
  return { result, text };
}

async function step(name, tool, args) {
  const { result, text } = await call(tool, args);
  const entry = { step: name, isError: result.isError === true };
  if (entry.isError) entry.error = text.split("\n").slice(0, 2).join("\n");
  report.steps.push(entry);
  return text;
}

async function refOf(role, name) {
  const { text } = await call("browser_snapshot", {});
  const line = text.split("\n").find((l) => l.trim().startsWith(`- ${role} "${name}"`));
  const ref = /\[ref=([^\]]+)\]/.exec(line ?? "")?.[1];
  if (!ref) throw new Error(`no ref for ${role} "${name}" in:\n${text}`);
  return ref;
}

await step("navigate", "browser_navigate", { url: site });
const count = await refOf("button", "Count");
await step("click", "browser_click", { element: "Count button", target: count });
await step("double click", "browser_click", {
  element: "Double button",
  target: await refOf("button", "Double"),
  doubleClick: true,
});
await step("right click", "browser_click", {
  element: "Menu button",
  target: await refOf("button", "Menu"),
  button: "right",
});
await step("shift click", "browser_click", {
  element: "Shifted button",
  target: await refOf("button", "Shifted"),
  modifiers: ["Shift"],
});
await step("type to focus", "browser_type", { element: "Keys field", target: await refOf("textbox", "Keys"), text: "k" });
await step("press key", "browser_press_key", { key: "ArrowDown" });
await step("type", "browser_type", { element: "Query field", target: await refOf("textbox", "Query"), text: "hello" });
await step("check", "browser_click", { element: "Gift checkbox", target: await refOf("checkbox", "Gift") });
await step("select", "browser_select_option", {
  element: "Size list",
  target: await refOf("combobox", "Size"),
  values: ["Medium"],
});
await step("wait for text", "browser_wait_for", { text: "Search" });
const found = await call("browser_find", { text: "search" });
report.found = found.text.split("\n").find((line) => line.startsWith("Found")) ?? found.text;
report.tabs = (await call("browser_tabs", { action: "list" })).text.split("\n").filter((l) => l.startsWith("- 0:")).length;
await step("submit", "browser_click", { element: "Search button", target: await refOf("button", "Search") });
await step("stale ref", "browser_click", { element: "Count button", target: count });
report.stale_ref = count;
await step("no target", "browser_click", { element: "Count button" });
await step("back", "browser_navigate_back", {});
await step("click after back", "browser_click", { element: "Count button", target: await refOf("button", "Count") });
await Promise.all(pending);
report.record = await (await fetch(new URL("/record", site))).json();
await client.close();
console.log(JSON.stringify(report));
