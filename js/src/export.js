// The loader of a static export (BokehWidget.to_html, xprof_widgets/widgets/_export.py):
// a stand-in for anywidget's model that runs the unchanged front end (widget.js)
// against the state saved in the page, answers "load-bokeh" with the page's own
// BokehJS and requests with a reply without data, then replays the recorded x
// ranges and pushes. What the page holds: _export.py's docstring; the messages:
// docs/frontend.md. Inlined in the page as a <script type="module">: it must not
// hold "</script", "<script" or "<!--" (build.mjs checks). Plain ES2020, no imports.

const byId = (id) => document.getElementById(id);
const DATA = JSON.parse(byId("xprof-export-data").textContent);

function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function blockBytes(id) {
  const el = byId(id);
  return el.dataset.encoding === "base64" ? fromBase64(el.textContent) : new TextEncoder().encode(el.textContent);
}

function asView(bytes) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

class StaticModel {
  constructor(state) {
    this.state = { ...state };
    this.listeners = new Map();
  }
  get(key) {
    return this.state[key];
  }
  set(key, value) {
    const before = JSON.stringify(this.state[key]);
    this.state[key] = value;
    if (JSON.stringify(value) !== before) this.emit(`change:${key}`, this, value);
  }
  save_changes() {}
  on(name, callback) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(callback);
  }
  off(name, callback) {
    if (name == null) this.listeners.clear();
    else if (callback == null) this.listeners.delete(name);
    else this.listeners.get(name)?.delete(callback);
  }
  emit(name, ...args) {
    for (const callback of [...(this.listeners.get(name) ?? [])]) {
      try {
        callback(...args);
      } catch (error) {
        console.error("xprof_widgets static export:", error);
      }
    }
  }
  send(content) {
    // Answered after the caller returns, as a kernel would be.
    setTimeout(() => this.answer(content ?? {}), 0);
  }
  answer(content) {
    if (content.type === "load-bokeh") {
      const reply = { type: "bokeh", nonce: content.nonce, version: DATA.bokeh_version };
      if (content.version !== DATA.bokeh_version) {
        reply.error = `the page's front end wants BokehJS ${content.version}, the export holds ${DATA.bokeh_version}`;
        this.emit("msg:custom", reply, []);
      } else {
        this.emit("msg:custom", reply, [asView(blockBytes("xprof-export-bokeh"))]);
      }
    } else if (content.type === "request") {
      // A reply with no data: the view stops waiting and keeps what it shows.
      if (!this.toldNoKernel) console.info("xprof_widgets static export: no kernel, requests get no data");
      this.toldNoKernel = true;
      this.emit(
        "msg:custom",
        {
          type: "reply",
          id: content.id,
          view: content.view,
          kind: content.kind,
          content: { static_export: true },
          columns: [],
        },
        [],
      );
    }
  }
}

const model = new StaticModel(DATA.state);
const el = byId("xprof-export-root");
let replayed = false;

// The view as it was: x ranges first (their requests are answered without
// data), then the last data Python sent per source.
function replay() {
  if (replayed) return;
  replayed = true;
  for (const range of DATA.ranges) model.emit("msg:custom", { type: "range", ...range }, []);
  for (const push of DATA.pushes) {
    model.emit(
      "msg:custom",
      push.msg,
      push.buffers.map((b) => asView(fromBase64(b))),
    );
  }
  requestAnimationFrame(() => {
    document.documentElement.dataset.xprofReplayed = String(DATA.pushes.length);
  });
}

model.on("change:status", () => {
  if (model.get("status") === "ready") replay();
});

function showError(error) {
  console.error("xprof_widgets static export:", error);
  const pre = document.createElement("pre");
  pre.className = "xprof-error";
  pre.textContent = `xprof_widgets static export could not start: ${error?.message ?? error}`;
  el.appendChild(pre);
  document.documentElement.dataset.xprofReplayed = "error";
}

const url = URL.createObjectURL(new Blob([blockBytes("xprof-export-widget")], { type: "text/javascript" }));
import(url).then(
  async (module) => {
    URL.revokeObjectURL(url);
    const widget = module.default ?? module;
    try {
      await widget.initialize?.({ model });
      await widget.render({ model, el });
    } catch (error) {
      showError(error);
    }
  },
  (error) => {
    URL.revokeObjectURL(url);
    showError(error);
  },
);
