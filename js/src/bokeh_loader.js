// Loads BokehJS once per page and version: the first widget to need it asks
// its kernel over the comm ("load-bokeh"), the kernel sends the bundle as a
// binary buffer, and every widget on the page awaits the same module promise
// kept on globalThis. Messages and the reasons for this design:
// docs/frontend.md ("The choice", "Messages").
import { newId } from "./ids.js";

const BOKEH_VERSION = __BOKEH_VERSION__; // replaced by build.mjs
const GLOBAL_KEY = "__xprof_widgets_bokeh";

// A failed load is forgotten so the next widget can ask again through its own comm.
function loadBokeh(model) {
  globalThis[GLOBAL_KEY] ??= {};
  const registry = globalThis[GLOBAL_KEY];
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

// The BokehJS module, asked for through this widget's comm if need be.
export async function getBokeh(model) {
  try {
    return await loadBokeh(model);
  } catch {
    // Another widget's request may have died with its comm: ask through ours.
    return await loadBokeh(model);
  }
}
