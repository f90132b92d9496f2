// The BokehJS bundle, loaded once per page (see widget.js: loadBokeh).
// `main` registers the core models: plots, layouts, glyphs, tools, sources,
// annotations. Bokeh's widgets (Select, Slider, ...) and DataTable are left
// out (they add 680 KB): our selectors and tables are plain HTML from Python.
// MathJax is stubbed out in build.mjs.
import * as Bokeh from "@bokeh/bokehjs/build/js/lib/main.js";

export const version = Bokeh.version;
export const embed = Bokeh.embed;
export const embed_item = Bokeh.embed.embed_item;
export const Models = Bokeh.Models;
export const documents = Bokeh.documents;
export const set_log_level = Bokeh.set_log_level;
