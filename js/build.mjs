// Builds ../xprof_widgets/static/ from src/:
//   widget.js:  the small anywidget ESM shared by every xprof widget (no BokehJS;
//               entry src/widget.js, with the loader, column codec and view modules).
//   widget.css: every widget's CSS (entry src/widget.css), the widgets' `_css`.
//   bokeh.js:   BokehJS as one ESM, sent once per page over the comm and
//               import()ed from a Blob URL (see src/bokeh_loader.js).
//   export.js, export.css: the loader and page style of a static export
//               (BokehWidget.to_html, xprof_widgets/widgets/_export.py).
// docs/frontend.md says why it is built this way.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import * as esbuild from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const outdir = path.resolve(here, "../xprof_widgets/static");
fs.mkdirSync(outdir, { recursive: true });

const bokehVersion = JSON.parse(
  fs.readFileSync(path.join(here, "node_modules/@bokeh/bokehjs/package.json"), "utf8"),
).version;

const stub = path.join(here, "src/mathjax_stub.js");
// BokehJS imports its MathJax glue as "./mathjax" (models/text/providers.js)
// and "./mathjax/main" / "mathjax-full/..." elsewhere: all of them go to the stub.
const stubMathjax = {
  name: "stub-mathjax",
  setup(build) {
    build.onResolve({ filter: /(^|\/)mathjax(\/|\.js$|$)|^mathjax-full(\/|$)/ }, (args) => {
      if (args.path.includes("mathjax_stub")) return undefined;
      return { path: stub };
    });
  },
};

const common = {
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2020",
  legalComments: "none",
  define: { "define.amd": "false" },
  logLevel: "info",
};

// CSS: nested rules (src/styles/common.css) become flat ones; `:is()` is fine for these browsers.
const css = {
  bundle: true,
  minify: true,
  legalComments: "none",
  target: ["chrome88", "edge88", "firefox78", "safari14"],
  logLevel: "info",
};

await esbuild.build({
  ...common,
  entryPoints: [path.join(here, "src/bokeh_entry.js")],
  outfile: path.join(outdir, "bokeh.js"),
  plugins: [stubMathjax],
});

await esbuild.build({
  ...common,
  entryPoints: [path.join(here, "src/widget.js")],
  // The loader keys its shared promise by version and checks what it got.
  define: { ...common.define, __BOKEH_VERSION__: JSON.stringify(bokehVersion) },
  outfile: path.join(outdir, "widget.js"),
});

await esbuild.build({
  ...css,
  entryPoints: [path.join(here, "src/widget.css")],
  outfile: path.join(outdir, "widget.css"),
});

await esbuild.build({
  ...common,
  entryPoints: [path.join(here, "src/export.js")],
  outfile: path.join(outdir, "export.js"),
});

await esbuild.build({
  ...css,
  entryPoints: [path.join(here, "src/export.css")],
  outfile: path.join(outdir, "export.css"),
});

// export.js goes into the page as an inline <script type="module">: nothing in it may end
// that element early or change how the HTML parser reads it.
const shim = fs.readFileSync(path.join(outdir, "export.js"), "utf8");
if (/<\/script|<!--|<script/i.test(shim)) {
  throw new Error("export.js holds </script, <script or <!--: it cannot be inlined in the export page");
}

for (const name of ["bokeh.js", "widget.js", "widget.css", "export.js", "export.css"]) {
  const bytes = fs.readFileSync(path.join(outdir, name));
  console.log(`${name}: ${bytes.length} bytes, ${gzipSync(bytes).length} gzip`);
}
