// One rendered view of a widget: Python's HTML with its figures placed in it,
// selection and hover reported to Python, data swapped in from pushes and
// replies, requests sent from HTML elements and range-tagged plots. What each
// message holds and how requests queue: docs/frontend.md ("Python API",
// "Messages"); Python's side: xprof_widgets/widgets/_bokeh.py.
import { getBokeh } from "./bokeh_loader.js";
import { columnLength, decodeColumns } from "./columns.js";
import { newId, plainId } from "./ids.js";

// Tag on a plot whose x-range changes send requests (BokehWidget.request_on_range).
const RANGE_TAG = "xprof:range-request:";

// The plots of a figure slot whose x range asks Python for data (tagged RANGE_TAG).
function* rangePlots(slot) {
  for (const doc of slot.docs ?? []) {
    for (const model of doc.all_models) {
      const tags = Array.isArray(model.tags) ? model.tags : [];
      if (model.x_range != null && tags.some((t) => typeof t === "string" && t.startsWith(RANGE_TAG))) yield model;
    }
  }
}

// Scroll a range (either direction: the trace viewer's y runs downwards) so that it shows
// `value`, centred, when it does not yet; its length kept and its bounds respected.
function scrollTo(range, value) {
  const lo = Math.min(range.start, range.end);
  const hi = Math.max(range.start, range.end);
  const length = hi - lo;
  if (!(length > 0) || (value - 0.5 >= lo && value + 0.5 <= hi)) return;
  let newLo = value - length / 2;
  const bounds = Array.isArray(range.bounds) ? range.bounds : null;
  if (bounds != null) {
    const [bLo, bHi] = [Math.min(...bounds), Math.max(...bounds)];
    newLo = Math.max(bLo, Math.min(newLo, bHi - length));
  }
  if (range.start > range.end) range.setv({ start: newLo + length, end: newLo });
  else range.setv({ start: newLo, end: newLo + length });
}

function isDataSource(model) {
  return model != null && model.data !== undefined && model.selected !== undefined && model.inspect !== undefined;
}

export class WidgetView {
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
      if (event.key === "Enter" && event.target.matches?.("input[data-request]")) {
        event.preventDefault();
        event.stopPropagation();
        this.domRequest(event, "change");
      } else if (this.keyNavigate(event)) {
        event.preventDefault();
        event.stopPropagation(); // JupyterLab 4 reads shortcuts as the key bubbles: A, S, D are its
      }
    };
    this.root.addEventListener("keydown", this.onKey);
    // Focusable (not in the tab order): a click on a plot gives the widget the keys.
    if (this.root.tabIndex < 0 && !this.root.hasAttribute("tabindex")) this.root.tabIndex = -1;
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

  // XProf's (and Perfetto's) keys on the plots whose x range asks for data (the trace
  // viewer's): W / S zoom in / out by a fifth around the middle, A / D pan by a fifth.
  // Not while typing in a field, nor with a modifier. True when a plot moved.
  keyNavigate(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.target.matches?.("input, select, textarea")) {
      return false;
    }
    const key = event.key?.toLowerCase();
    if (!["w", "s", "a", "d"].includes(key)) return false;
    let moved = false;
    for (const slot of this.slots.values()) {
      for (const model of rangePlots(slot)) {
        const { start, end } = model.x_range;
        const width = end - start;
        if (!(width > 0)) continue;
        const middle = (start + end) / 2;
        const half = key === "w" ? width * 0.4 : key === "s" ? width * 0.625 : width / 2;
        const shift = key === "a" ? -width * 0.2 : key === "d" ? width * 0.2 : 0;
        model.x_range.setv({ start: middle + shift - half, end: middle + shift + half });
        moved = true;
      }
    }
    return moved;
  }

  // A "range" message: Python moves the x range of a figure's range-tagged
  // plots (set_x_range); they then ask for that window's data.
  // With `y`, a plot whose y range does not show that value scrolls to it (centred, its
  // length and direction kept, within its bounds): the trace viewer's row of an event.
  setRange(msg) {
    const slot = this.slots.get(msg.figure);
    if (slot == null) return;
    for (const model of rangePlots(slot)) {
      if (msg.y != null && model.y_range != null) scrollTo(model.y_range, msg.y);
      model.x_range.setv({ start: msg.start, end: msg.end });
    }
  }

  // One request in flight per view; the latest waiting request of a kind wins
  // (docs/frontend.md, "Requests").
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
    for (const extra of msg.also ?? []) {
      this.applyColumns(extra.source, decodeColumns(extra.columns, buffers), extra.mode);
    }
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

  // `data-hover` elements of Python's HTML: a request when the pointer enters
  // one (once per element). The attributes: docs/frontend.md ("Python API").
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

  // `data-select` elements: a click sets the `selected` trait from the page, as
  // a tap on a glyph does (a front-end change: marimo re-runs the cells that
  // read it, as it does after a tap).
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

  // `data-request` elements: a request on click (buttons) or change (inputs, selects).
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
