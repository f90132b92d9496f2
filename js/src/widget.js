// The anywidget front end shared by every xprof widget (Python side:
// xprof_widgets/widgets/_bokeh.py). It holds no BokehJS: BokehJS (1.3 MB)
// comes once per page from the kernel over the comm, and every widget on the
// page awaits the same module promise kept on globalThis.
//
// Messages (all custom anywidget messages; none is stored in widget state):
//   JS -> Py  {type: "load-bokeh", nonce, version}
//   Py -> JS  {type: "bokeh", nonce, version} + [bundle bytes]
//   JS -> Py  {type: "request", id, view, kind, params}
//   Py -> JS  {type: "range", figure, start, end}: set a figure's x range
//   Py -> JS  {type: "reply", id, view, kind, content, source, mode, columns, also?, error?} + buffers
//             (also: [{source, mode, columns}], other sources replaced in the same frame)
//   Py -> JS  {type: "push", source, mode, columns} + buffers
//   JS -> Py  {type: "hover", view, figure, source, index, id}
// `columns` is a list of {name, dtype, buffer} (buffer: index into the
// message's binary buffers) or {name, values} (a JSON list, for strings).

const BOKEH_VERSION = __BOKEH_VERSION__; // replaced by build.mjs
const GLOBAL_KEY = "__xprof_widgets_bokeh";
const RANGE_TAG = "xprof:range-request:";

const TYPED_ARRAYS = {
  float64: Float64Array,
  float32: Float32Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
};

function newId() {
  return Math.random().toString(36).slice(2, 10) + Date.now().toString(36);
}

// One BokehJS module per page and version. The first widget to need it asks
// its kernel; the others await the same promise. A failed load is forgotten
// so the next widget can ask again through its own comm.
function loadBokeh(model) {
  const registry = (globalThis[GLOBAL_KEY] ??= {});
  if (registry[BOKEH_VERSION] == null) {
    const promise = new Promise((resolve, reject) => {
      const nonce = newId();
      const timer = setTimeout(() => {
        model.off("msg:custom", onMessage);
        reject(new Error("no BokehJS bundle from the kernel after 60 s"));
      }, 60000);
      function onMessage(msg, buffers) {
        if (msg == null || msg.type !== "bokeh" || msg.nonce !== nonce) return;
        clearTimeout(timer);
        model.off("msg:custom", onMessage);
        if (msg.error) {
          reject(new Error(msg.error));
          return;
        }
        const url = URL.createObjectURL(new Blob([buffers[0]], { type: "text/javascript" }));
        import(/* webpackIgnore: true */ url).then(
          (bokeh) => {
            URL.revokeObjectURL(url);
            if (bokeh.version !== BOKEH_VERSION) {
              reject(new Error(`BokehJS ${bokeh.version} loaded, ${BOKEH_VERSION} expected`));
            } else {
              resolve(bokeh);
            }
          },
          (error) => {
            URL.revokeObjectURL(url);
            reject(error);
          },
        );
      }
      model.on("msg:custom", onMessage);
      model.send({ type: "load-bokeh", nonce, version: BOKEH_VERSION });
    });
    registry[BOKEH_VERSION] = promise;
    promise.catch(() => {
      if (registry[BOKEH_VERSION] === promise) delete registry[BOKEH_VERSION];
    });
  }
  return registry[BOKEH_VERSION];
}

async function getBokeh(model) {
  try {
    return await loadBokeh(model);
  } catch (error) {
    // Another widget's request may have died with its comm: ask through ours.
    return await loadBokeh(model);
  }
}

function asTypedArray(view, dtype) {
  const Type = TYPED_ARRAYS[dtype];
  if (Type == null) throw new Error(`unsupported dtype ${dtype}`);
  const buffer = view.buffer ?? view;
  const offset = view.byteOffset ?? 0;
  const length = view.byteLength;
  if (offset % Type.BYTES_PER_ELEMENT === 0) {
    return new Type(buffer, offset, length / Type.BYTES_PER_ELEMENT);
  }
  return new Type(buffer.slice(offset, offset + length));
}

function decodeColumns(meta, buffers) {
  const columns = {};
  for (const column of meta ?? []) {
    if (column.values != null) {
      columns[column.name] = column.values;
    } else if (column.table != null) {
      // Dictionary-encoded strings: codes in a buffer, each distinct value once.
      const codes = asTypedArray(buffers[column.buffer], column.dtype);
      columns[column.name] = Array.from(codes, (code) => column.table[code]);
    } else {
      columns[column.name] = asTypedArray(buffers[column.buffer], column.dtype);
    }
  }
  return columns;
}

function columnLength(columns) {
  for (const value of Object.values(columns)) return value.length;
  return 0;
}

function plainId(value) {
  if (typeof value === "bigint") return Number(value);
  return value === undefined ? null : value;
}

function isDataSource(model) {
  return model != null && model.data !== undefined && model.selected !== undefined && model.inspect !== undefined;
}

class WidgetView {
  constructor(model, el) {
    this.model = model;
    this.viewId = newId();
    this.root = document.createElement("div");
    this.root.className = "xprof-widget";
    this.root.dataset.view = this.viewId;
    this.root.dataset.ready = "0";
    el.appendChild(this.root);
    this.slots = new Map(); // figure name -> {container, docs, views}
    this.generation = 0;
    this.seq = 0;
    this.inflight = null;
    this.pending = new Map(); // kind -> request waiting for the in-flight one
    this.applyingSelection = false;
    this.lastHover = null;
    this.pushes = 0;
    this.figuresDrawn = 0;

    this.onMessage = (msg, buffers) => this.handleMessage(msg, buffers);
    this.onHtml = () => this.renderHtml();
    this.onFigures = () => this.renderFigures();
    this.onSelected = () => this.applySelection();
    this.onClick = (event) => this.domRequest(event, "click");
    this.onChange = (event) => this.domRequest(event, "change");
    this.onOver = (event) => this.domHover(event);
    this.lastDomHover = null;
    model.on("msg:custom", this.onMessage);
    model.on("change:html", this.onHtml);
    model.on("change:figures", this.onFigures);
    model.on("change:selected", this.onSelected);
    this.root.addEventListener("click", this.onClick);
    this.root.addEventListener("change", this.onChange);
    // Enter in a text field asks at once; the notebook must not take the key
    // (JupyterLab's command mode would otherwise swallow it).
    this.onKey = (event) => {
      if (event.key !== "Enter" || !event.target.matches?.("input[data-request]")) return;
      event.preventDefault();
      event.stopPropagation();
      this.domRequest(event, "change");
    };
    this.root.addEventListener("keydown", this.onKey);
    this.root.addEventListener("mouseover", this.onOver);
  }

  start() {
    this.renderHtml();
    return this.renderFigures();
  }

  destroy() {
    this.generation++;
    this.model.off("msg:custom", this.onMessage);
    this.model.off("change:html", this.onHtml);
    this.model.off("change:figures", this.onFigures);
    this.model.off("change:selected", this.onSelected);
    this.removeFigures();
    this.root.remove();
  }

  // ---- HTML and figures -------------------------------------------------

  renderHtml() {
    for (const slot of this.slots.values()) slot.container.remove();
    this.root.innerHTML = this.model.get("html") ?? "";
    this.placeFigures();
  }

  placeFigures() {
    for (const [name, slot] of this.slots) {
      const target = this.root.querySelector(`[data-figure="${CSS.escape(name)}"]`);
      (target ?? this.root).appendChild(slot.container);
    }
  }

  removeFigures() {
    for (const slot of this.slots.values()) {
      for (const view of slot.views) view.remove();
      slot.container.remove();
    }
    this.slots.clear();
  }

  async renderFigures() {
    const generation = ++this.generation;
    this.root.dataset.ready = "0";
    this.removeFigures();
    const figures = this.model.get("figures") ?? {};
    for (const name of Object.keys(figures)) {
      const container = document.createElement("div");
      container.className = "xprof-figure";
      container.dataset.figureName = name;
      this.slots.set(name, { container, docs: [], views: [] });
    }
    this.placeFigures();
    try {
      if (this.slots.size > 0) {
        const Bokeh = await getBokeh(this.model);
        if (generation !== this.generation) return;
        await Promise.all(
          Object.entries(figures).map(async ([name, item]) => {
            const slot = this.slots.get(name);
            const manager = await Bokeh.embed.embed_item(item, slot.container);
            slot.views = [...manager.roots];
          }),
        );
        if (generation !== this.generation) return;
        for (const [name, slot] of this.slots) {
          slot.docs = [...new Set(slot.views.map((view) => view.model.document).filter((doc) => doc != null))];
          this.bindDocs(name, slot.docs);
        }
        this.applySelection();
        // Bokeh paints on an animation frame: ready means painted, so screenshots see the new figures.
        // (A hidden tab runs no animation frames: the timer then ends the wait.)
        await new Promise((resolve) => {
          requestAnimationFrame(() => requestAnimationFrame(resolve));
          setTimeout(resolve, 200);
        });
        if (generation !== this.generation) return;
      }
      // How many times this view drew its figures: a test waits for it to grow after a change.
      this.root.dataset.figuresDrawn = String(++this.figuresDrawn);
      this.root.dataset.ready = "1";
      if (this.model.get("status") !== "ready") {
        this.model.set("status", "ready");
        this.model.save_changes();
      }
    } catch (error) {
      if (generation !== this.generation) return;
      console.error("xprof_widgets:", error);
      this.root.dataset.ready = "error";
      const pre = document.createElement("pre");
      pre.className = "xprof-error";
      pre.textContent = `xprof_widgets could not draw: ${error.message ?? error}`;
      this.root.appendChild(pre);
      this.model.set("status", `error: ${error.message ?? error}`);
      this.model.save_changes();
    }
  }

  *namedSources(name) {
    for (const slot of this.slots.values()) {
      for (const doc of slot.docs) {
        for (const model of doc.all_models) {
          if (isDataSource(model) && model.name != null && (name == null || model.name === name)) {
            yield model;
          }
        }
      }
    }
  }

  bindDocs(figure, docs) {
    for (const doc of docs) {
      for (const model of doc.all_models) {
        if (isDataSource(model) && model.name != null) {
          model.selected.change.connect(() => this.onSourceSelected(figure, model));
          model.inspect.connect(() => this.onSourceHovered(figure, model));
        }
        const tags = Array.isArray(model.tags) ? model.tags : [];
        const tag = tags.find((t) => typeof t === "string" && t.startsWith(RANGE_TAG));
        if (tag != null && model.x_range != null) {
          const kind = tag.slice(RANGE_TAG.length);
          const send = () =>
            this.request(kind, {
              figure,
              x_start: model.x_range.start,
              x_end: model.x_range.end,
              y_start: model.y_range?.start ?? null,
              y_end: model.y_range?.end ?? null,
              width_px: model.inner_width ?? model.width ?? null,
            }).catch((error) => console.error("xprof_widgets:", error));
          model.x_range.change.connect(send);
        }
      }
    }
  }

  // ---- selection and hover ---------------------------------------------

  onSourceSelected(figure, source) {
    if (this.applyingSelection) return;
    const indices = [...source.selected.indices];
    const ids = source.data.id;
    let value = {};
    if (indices.length > 0) {
      value = {
        figure,
        source: source.name,
        index: indices[0],
        id: ids != null ? plainId(ids[indices[0]]) : null,
        ids: ids != null ? indices.map((i) => plainId(ids[i])) : indices,
      };
    }
    if (JSON.stringify(value) === JSON.stringify(this.model.get("selected") ?? {})) return;
    this.model.set("selected", value);
    this.model.save_changes();
  }

  // Re-applies the `selected` trait to the page's sources by stable id: after
  // Python sets it, and after every data swap (row indices change, ids don't).
  // `selected.linked` names other sources that show the same ids (e.g. one
  // buffer drawn in two charts): they highlight the same rows.
  applySelection() {
    const selected = this.model.get("selected") ?? {};
    this.applyingSelection = true;
    try {
      for (const source of this.namedSources()) {
        let indices = [];
        if (selected.source === source.name || (selected.linked ?? []).includes(source.name)) {
          const ids = source.data.id;
          if (ids != null && selected.id != null) {
            const wanted = new Set((selected.ids ?? [selected.id]).map(String));
            for (let i = 0; i < ids.length; i++) if (wanted.has(String(plainId(ids[i])))) indices.push(i);
          } else if (ids == null && selected.index != null) {
            indices = [selected.index];
          }
        }
        const current = [...source.selected.indices];
        if (current.length !== indices.length || current.some((v, i) => v !== indices[i])) {
          source.selected.indices = indices;
        }
      }
    } finally {
      this.applyingSelection = false;
    }
  }

  onSourceHovered(figure, source) {
    const indices = source.inspected?.indices ?? [];
    const index = indices.length > 0 ? indices[indices.length - 1] : null;
    const ids = source.data.id;
    const id = index == null ? null : ids != null ? plainId(ids[index]) : index;
    const key = `${source.name}\u0000${id}`;
    if (key === this.lastHover) return;
    this.lastHover = key;
    this.model.send({ type: "hover", view: this.viewId, figure, source: source.name, index, id });
  }

  // ---- data: Python-initiated pushes and request/reply ------------------

  applyColumns(sourceName, columns, mode) {
    let found = 0;
    for (const source of this.namedSources(sourceName)) {
      source.data = mode === "update" ? { ...source.data, ...columns } : columns;
      found++;
    }
    this.applySelection();
    this.pushes++;
    this.root.dataset.pushes = String(this.pushes);
    this.root.dataset.lastPush = sourceName;
    this.root.dataset.lastPushRows = String(columnLength(columns));
    return found;
  }

  handleMessage(msg, buffers) {
    if (msg == null) return;
    if (msg.type === "push") {
      this.applyColumns(msg.source, decodeColumns(msg.columns, buffers), msg.mode);
    } else if (msg.type === "range") {
      this.setRange(msg);
    } else if (msg.type === "reply" && msg.view === this.viewId) {
      this.handleReply(msg, buffers);
    }
  }

  // Python moves the x range of a figure's plots tagged with request_on_range
  // ({type: "range", figure, start, end}); they then ask for that window's data.
  setRange(msg) {
    const slot = this.slots.get(msg.figure);
    if (slot == null) return;
    for (const doc of slot.docs) {
      for (const model of doc.all_models) {
        const tags = Array.isArray(model.tags) ? model.tags : [];
        if (model.x_range != null && tags.some((t) => typeof t === "string" && t.startsWith(RANGE_TAG))) {
          model.x_range.setv({ start: msg.start, end: msg.end });
        }
      }
    }
  }

  // One request in flight per view. While one is in flight, a newer request
  // of the same kind replaces the waiting one (the latest viewport wins), and
  // a reply is dropped when a newer request of its kind is already waiting.
  request(kind, params = {}) {
    return new Promise((resolve, reject) => {
      const request = { kind, params, resolve, reject, createdAt: performance.now() };
      if (this.inflight != null) {
        this.pending.get(kind)?.resolve(null);
        this.pending.set(kind, request);
        return;
      }
      this.sendRequest(request);
    });
  }

  sendRequest(request) {
    request.id = ++this.seq;
    this.inflight = request;
    this.root.dataset.pending = "1";
    this.model.send({ type: "request", id: request.id, view: this.viewId, kind: request.kind, params: request.params });
  }

  handleReply(msg, buffers) {
    const request = this.inflight;
    if (request == null || msg.id !== request.id) return;
    this.inflight = null;
    const superseded = this.pending.has(request.kind);
    const next = this.pending.values().next();
    if (!next.done) {
      this.pending.delete(next.value.kind);
      this.sendRequest(next.value);
    } else {
      this.root.dataset.pending = "0";
    }
    if (superseded) {
      request.resolve(null);
      return;
    }
    if (msg.error) {
      console.error("xprof_widgets: request failed:", msg.error);
      request.reject(new Error(msg.error));
      return;
    }
    const arrived = performance.now();
    // Sources that change with the main one, applied in the same task: one frame draws them all.
    for (const extra of msg.also ?? []) this.applyColumns(extra.source, decodeColumns(extra.columns, buffers), extra.mode);
    const columns = decodeColumns(msg.columns, buffers);
    if (msg.source != null) this.applyColumns(msg.source, columns, msg.mode);
    // Where a wait goes: request to reply (kernel and transport), then decoding and
    // handing the data to BokehJS; the rest up to lastDrawMs is drawing.
    this.root.dataset.lastReplyMs = (arrived - request.createdAt).toFixed(1);
    this.root.dataset.lastApplyMs = (performance.now() - arrived).toFixed(1);
    this.root.dataset.replies = String(Number(this.root.dataset.replies ?? 0) + 1);
    // From the request (e.g. a wheel step moving the range) to the frame that
    // shows its data: what a user waits for. Browser tests read it.
    const replies = this.root.dataset.replies;
    requestAnimationFrame(() => {
      this.root.dataset.lastDrawMs = (performance.now() - request.createdAt).toFixed(1);
      this.root.dataset.drawnReplies = replies;
    });
    request.resolve({ content: msg.content ?? {}, columns, buffers });
  }

  // HTML from Python asks for data declaratively:
  //   <button data-request="KIND" data-params='{"n": 10}'>
  //   <select data-request="KIND"> (params gain {value})
  // HTML from Python asks to hear about hovering declaratively:
  //   <tr data-hover="KIND" data-params='{"id": 3}'> sends a KIND request when
  //   the pointer enters it (once per element; the newest request wins).
  domHover(event) {
    const el = event.target.closest?.("[data-hover]");
    if (el == null || !this.root.contains(el) || el === this.lastDomHover) return;
    this.lastDomHover = el;
    let params = {};
    try {
      params = JSON.parse(el.dataset.params ?? "{}");
    } catch (error) {
      console.error("xprof_widgets: bad data-params", error);
    }
    this.request(el.dataset.hover, params).catch(() => {});
  }

  // HTML from Python selects declaratively, as a tap on a glyph does:
  //   <tr data-select='{"figure": "sunburst", "source": "wedges", "id": 3}'>
  // sets the `selected` trait from the page (a front-end change: marimo re-runs
  // the cells that read it, as it does after a tap).
  domSelect(event) {
    const el = event.target.closest?.("[data-select]");
    if (el == null || !this.root.contains(el)) return false;
    let value;
    try {
      value = JSON.parse(el.dataset.select);
    } catch (error) {
      console.error("xprof_widgets: bad data-select", error);
      return true;
    }
    if (JSON.stringify(value) !== JSON.stringify(this.model.get("selected") ?? {})) {
      this.model.set("selected", value);
      this.model.save_changes();
      this.applySelection();
    }
    return true;
  }

  domRequest(event, type) {
    if (type === "click" && this.domSelect(event)) return;
    const el = event.target.closest?.("[data-request]");
    if (el == null || !this.root.contains(el)) return;
    const isInput = el.matches("select, input, textarea");
    if ((type === "change") !== isInput) return;
    let params = {};
    try {
      params = JSON.parse(el.dataset.params ?? "{}");
    } catch (error) {
      console.error("xprof_widgets: bad data-params", error);
    }
    if (isInput) params.value = el.type === "checkbox" ? el.checked : el.value;
    this.request(el.dataset.request, params).catch(() => {});
  }
}

export default {
  render({ model, el }) {
    const view = new WidgetView(model, el);
    view.start();
    return () => view.destroy();
  },
};
