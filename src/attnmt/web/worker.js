// The explorer's server in a Web Worker (an ES module worker): the page posts what it
// would send to `attnmt serve`, server.js answers it from the site's ONNX exports, with
// onnxruntime-web, in the page and without a server.
//
//   const worker = new Worker("worker.js", {type: "module"});
//   worker.postMessage({type: "init", site, base});     // site.json parsed; base: its folder's URL
//   worker.postMessage({type: "request", id, path, body});
//   // <- {type: "event", id, event, data}  zero or more ("start", "step": the stream's)
//   // <- {type: "response", id, status, data}  exactly one: the server's status and JSON
//   worker.postMessage({type: "cancel", id});           // -> 499 {detail: "Stopped."}
//
// `init` imports the runtime (base + site.runtime.module), points its WASM files at
// base + site.runtime.wasm and runs it on one thread; each model loads on first use, its
// files read from base + its `dir`. Requests sent before `init` wait for it.
//
// `connect(scope, {importModule, fetchFile})` wires any message port (a worker's `self`,
// or a stand-in in node) to a server: tests/test_web_worker.py drives it in node.

import { createServer } from "./server.js";

// A zero-delay task (not a microtask): lets the worker's message events in.
function macrotask() {
  if (typeof MessageChannel === "undefined") return new Promise((r) => setTimeout(r, 0));
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      channel.port1.close();
      resolve();
    };
    channel.port2.postMessage(null);
  });
}

// The runtime module, set up for the page (one WASM thread, its files beside the site).
async function runtimeOf(site, base, importModule) {
  const runtime = site.runtime ?? {};
  const url = new URL(runtime.module, base).href;
  let ort;
  try {
    ort = await importModule(url);
  } catch (err) {
    throw new Error(`cannot import the runtime ${runtime.module}: ${err.message}`);
  }
  ort = ort.default && !ort.InferenceSession ? ort.default : ort;
  if (ort.env?.wasm) {
    if (runtime.wasm) ort.env.wasm.wasmPaths = new URL(runtime.wasm, base).href;
    ort.env.wasm.numThreads = 1;
  }
  return ort;
}

export function connect(scope, { importModule = (url) => import(url), fetchFile = null } = {}) {
  let ready = null; // a promise of the server, once `init` came
  let startServer;
  const started = new Promise((resolve) => {
    startServer = resolve;
  });
  const running = new Map(); // id -> AbortController
  const post = (message) => scope.postMessage(message);

  function init({ site, base }) {
    const read = fetchFile ?? ((path) => fetch(new URL(path, base)));
    try {
      const server = createServer({
        site,
        ort: () => runtimeOf(site, base, importModule),
        read,
        pause: macrotask,
      });
      ready = Promise.resolve(server);
    } catch (err) {
      ready = Promise.reject(err);
      ready.catch(() => {});
    }
    startServer(ready);
  }

  async function request({ id, path, body }) {
    const controller = new AbortController();
    running.set(id, controller);
    let answer;
    try {
      const server = await (ready ?? started);
      const onEvent = (event, data) => post({ type: "event", id, event, data });
      answer = await server.handle(path, body, { onEvent, signal: controller.signal });
    } catch (err) {
      const detail = `the page's server could not start: ${err.message}`;
      answer = { status: 500, data: { detail } };
    } finally {
      running.delete(id);
    }
    if (controller.signal.aborted) answer = { status: 499, data: { detail: "Stopped." } };
    post({ type: "response", id, status: answer.status, data: answer.data });
  }

  const onMessage = (event) => {
    const message = event.data ?? {};
    if (message.type === "init") init(message);
    else if (message.type === "request") request(message);
    else if (message.type === "cancel") running.get(message.id)?.abort();
  };
  if (typeof scope.addEventListener === "function") scope.addEventListener("message", onMessage);
  else scope.onmessage = onMessage;
  return onMessage;
}

// In a worker: serve its page.
if (typeof WorkerGlobalScope !== "undefined" && globalThis instanceof WorkerGlobalScope) {
  connect(globalThis);
}
