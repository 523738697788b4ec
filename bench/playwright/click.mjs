// The peer in countersign's live benchmark: Playwright's own
// `locator.click()` (with its actionability checks) on the page the
// benchmark serves, in headless Chromium started from the binary countersign
// drives. The Rust harness alternates samples with its own subject, so it
// talks to this process line by line:
//   argv: <page url> <chromium executable>
//   prints `ready` once the page is loaded;
//   reads `click <n>`  -> prints the elapsed nanoseconds of n clicks;
//   reads `count`      -> prints the page's own count of trusted clicks;
//   end of input       -> closes the browser and exits.
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [url, executablePath] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage();
  await page.goto(url);
  const button = page.locator("#count");
  console.log("ready");
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    const [command, arg] = line.trim().split(/\s+/);
    if (command === "click") {
      const n = Number(arg);
      const start = process.hrtime.bigint();
      for (let i = 0; i < n; i++) {
        await button.click();
      }
      console.log(String(process.hrtime.bigint() - start));
    } else if (command === "count") {
      console.log(await page.locator("#clicks").textContent());
    } else {
      console.log(`error unknown command ${command}`);
    }
  }
} finally {
  await browser.close();
}
