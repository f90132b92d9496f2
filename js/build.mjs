// Builds ../xprof_widgets/static/{widget.js,bokeh.js}.
//   widget.js: the small anywidget ESM shared by every xprof widget (no BokehJS).
//   bokeh.js:  BokehJS as one ESM, sent once per page over the comm and
//              import()ed from a Blob URL (see src/widget.js).
import * as esbuild from "esbuild";
import { fileURLToPath } from "node:url";
import path from "node:path";
import fs from "node:fs";

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

const { gzipSync } = await import("node:zlib");
for (const name of ["bokeh.js", "widget.js"]) {
  const bytes = fs.readFileSync(path.join(outdir, name));
  console.log(`${name}: ${bytes.length} bytes, ${gzipSync(bytes).length} gzip`);
}
