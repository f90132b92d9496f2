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

// The views the page holds: one widget's, or a ProfileWidget's tools (a menu).
const VIEWS = DATA.tools ?? [{ label: DATA.widget, state: DATA.state, ranges: DATA.ranges, pushes: DATA.pushes }];
const root = byId("xprof-export-root");
let widgetModule = null; // the front end, imported once for every view
const mounted = new Map(); // view index -> its element

// The view as it was: x ranges first (their requests are answered without
// data), then the last data Python sent per source.
function replay(model, view, index) {
  for (const range of view.ranges) model.emit("msg:custom", { type: "range", ...range }, []);
  for (const push of view.pushes) {
    model.emit(
      "msg:custom",
      push.msg,
      push.buffers.map((b) => asView(fromBase64(b))),
    );
  }
  requestAnimationFrame(() => {
    document.documentElement.dataset.xprofShown = String(index);
    if (index === 0) document.documentElement.dataset.xprofReplayed = String(view.pushes.length);
  });
}

function showError(error, el) {
  console.error("xprof_widgets static export:", error);
  const pre = document.createElement("pre");
  pre.className = "xprof-error";
  pre.textContent = `xprof_widgets static export could not start: ${error?.message ?? error}`;
  el.appendChild(pre);
  document.documentElement.dataset.xprofReplayed = "error";
}

async function loadFrontEnd() {
  if (widgetModule == null) {
    const url = URL.createObjectURL(new Blob([blockBytes("xprof-export-widget")], { type: "text/javascript" }));
    try {
      const module = await import(url);
      widgetModule = module.default ?? module;
    } finally {
      URL.revokeObjectURL(url);
    }
  }
  return widgetModule;
}

// Shows view `index`, drawn on its first showing (drawn while visible: Bokeh sizes
// plots from their container); the others are hidden, kept as they were.
async function show(index) {
  for (const [k, el] of mounted) el.hidden = k !== index;
  if (mounted.has(index)) {
    document.documentElement.dataset.xprofShown = String(index);
    return;
  }
  const view = VIEWS[index];
  const el = document.createElement("div");
  el.className = "xprof-export-view";
  el.dataset.view = String(index);
  root.appendChild(el);
  mounted.set(index, el);
  const model = new StaticModel(view.state);
  let replayed = false;
  model.on("change:status", () => {
    if (model.get("status") === "ready" && !replayed) {
      replayed = true;
      replay(model, view, index);
    }
  });
  try {
    const widget = await loadFrontEnd();
    await widget.initialize?.({ model });
    await widget.render({ model, el });
  } catch (error) {
    showError(error, el);
  }
}

const menu = byId("xprof-export-tool");
menu?.addEventListener("change", () => show(Number(menu.value)));
show(0);
