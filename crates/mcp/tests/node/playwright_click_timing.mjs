// Times rule-decided `browser_click` calls, call to result, from the
// official MCP TypeScript SDK over stdio, against two servers at once:
// countersign-mcp --playwright-compat (an `auto` rule decides) and the
// real @playwright/mcp, on the same page, samples alternating. Run by the
// benchmark harness (bench/src/compat_bench.rs):
//
//   node playwright_click_timing.mjs '<ours: {"command", "args"}>' '<theirs>' <site url> <rounds> <clicks per round>
//
// Prints one JSON object: each side's per-round medians in nanoseconds,
// and each page's title, in which the page counts the clicks it received.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [oursJson, theirsJson, site, roundsText, perRoundText] = process.argv.slice(2);
const rounds = Number(roundsText);
const perRound = Number(perRoundText);

async function connect(server) {
  const transport = new StdioClientTransport({ command: server.command, args: server.args, stderr: "inherit" });
  const client = new Client({ name: "countersign-click-timing", version: "1.0.0" });
  await client.connect(transport);
  await client.callTool({ name: "browser_navigate", arguments: { url: site } });
  const text = (await client.callTool({ name: "browser_snapshot", arguments: {} })).content[0].text;
  const line = text.split("\n").find((l) => l.trim().startsWith('- button "Count"'));
  const target = /\[ref=([^\]]+)\]/.exec(line ?? "")?.[1];
  if (!target) throw new Error(`no Count button in ${text}`);
  return { client, click: { element: "Count button", target } };
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.floor(sorted.length / 2)];
};

async function sample(side) {
  const times = [];
  for (let i = 0; i < perRound; i++) {
    const start = process.hrtime.bigint();
    const result = await side.client.callTool({ name: "browser_click", arguments: side.click });
    times.push(process.hrtime.bigint() - start);
    if (result.isError) throw new Error(`a click failed: ${JSON.stringify(result.content)}`);
  }
  return median(times);
}

const ours = await connect(JSON.parse(oursJson));
const theirs = await connect(JSON.parse(theirsJson));
// One warm-up round each, not counted.
await sample(ours);
await sample(theirs);
const report = { ours: [], theirs: [] };
for (let round = 0; round < rounds; round++) {
  if (round % 2 === 0) {
    report.ours.push(Number(await sample(ours)));
    report.theirs.push(Number(await sample(theirs)));
  } else {
    report.theirs.push(Number(await sample(theirs)));
    report.ours.push(Number(await sample(ours)));
  }
}
// The page counts the clicks it received in its title.
for (const [name, side] of [["ours", ours], ["theirs", theirs]]) {
  const text = (await side.client.callTool({ name: "browser_snapshot", arguments: {} })).content[0].text;
  report[`${name}_title`] = /- Page Title: (.*)/.exec(text)?.[1] ?? null;
}
await ours.client.close();
await theirs.client.close();
console.log(JSON.stringify(report));
