// Preloaded into the MCP conformance suite (`node --import ./auth.mjs`).
//
// The suite's client has no option for a request header, and
// countersign-mcp answers `401` to any request without a bearer token. This
// adds `Authorization: Bearer $COUNTERSIGN_MCP_TOKEN` to every request the
// suite sends to the origin of its `--url` (through `fetch` and through
// undici's `request` alike: both use undici's global dispatcher), and to no
// other. Nothing else of a request is changed: a scenario that sends a
// foreign `Host` still sends it.

import { Agent, setGlobalDispatcher } from "undici";

const token = process.env.COUNTERSIGN_MCP_TOKEN;
const at = process.argv.indexOf("--url");
if (!token || at < 0 || !process.argv[at + 1]) {
  throw new Error("auth.mjs needs COUNTERSIGN_MCP_TOKEN and the suite's --url");
}
const origin = new URL(process.argv[at + 1]).origin;
const authorization = `Bearer ${token}`;

// undici accepts headers as an object, a flat [name, value, ...] array or
// an iterable of [name, value] pairs.
function withAuthorization(headers) {
  if (headers == null) {
    return { authorization };
  }
  if (Array.isArray(headers)) {
    return Array.isArray(headers[0])
      ? [...headers, ["authorization", authorization]]
      : [...headers, "authorization", authorization];
  }
  if (typeof headers[Symbol.iterator] === "function") {
    return [...headers, ["authorization", authorization]];
  }
  return { ...headers, authorization };
}

setGlobalDispatcher(
  new Agent().compose((dispatch) => (options, handler) => {
    const ours = new URL(String(options.origin)).origin === origin;
    return dispatch(
      ours ? { ...options, headers: withAuthorization(options.headers) } : options,
      handler,
    );
  }),
);
